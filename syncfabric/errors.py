"""What syncfabric refuses, by kind, in every layer (a switch that does not confirm is as
much a refusal as a full link); only the REST layer (apps/rest_json.py) turns a kind into
an HTTP status, so the library stays free of HTTP and Ryu."""


class ServiceError(Exception):
    """A request refused with a message and JSON-able details (e.g. max_feasible_mbps)."""

    def __init__(self, message, **details):
        super().__init__(message)
        self.details = details


class InvalidRequest(ServiceError):
    """Malformed or impossible as asked (400)."""


class NotFound(ServiceError):
    """An unknown host, tree, round or plan (404)."""


class Conflict(ServiceError):
    """Valid but not now: no capacity, or released or busy meanwhile (409)."""


class NotReady(ServiceError):
    """No fabric loaded, or a switch it needs is not connected (503)."""


class InstallFailed(ServiceError):
    """A switch rejected, or did not confirm, what was sent; nothing of it is left (500)."""
