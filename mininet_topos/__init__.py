"""Mininet fabrics for syncfabric and the helper that starts them on this platform."""
