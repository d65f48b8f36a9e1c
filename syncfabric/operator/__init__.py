"""What an operator reads: Prometheus metrics, the OpenAPI description, the live page."""
