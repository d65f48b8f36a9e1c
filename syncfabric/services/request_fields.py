"""Checks shared by the services' request parsers; they raise InvalidRequest (400)."""

from syncfabric.errors import InvalidRequest


def positive_number(value):
    """True for a JSON number > 0 (not a boolean)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value > 0


def whole_number(value):
    """True for a JSON integer >= 0 (not a boolean)."""
    return not isinstance(value, bool) and isinstance(value, int) and value >= 0


def check_fields(body, allowed, required):
    """InvalidRequest unless body is a JSON object with every required field and no field
    outside `allowed`."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request must be a JSON object")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise InvalidRequest("unknown field(s): %s" % ", ".join(unknown))
    missing = sorted(set(required) - set(body))
    if missing:
        raise InvalidRequest("missing field(s): %s" % ", ".join(missing))


def distinct_names(value, minimum=1):
    """True for a list of at least `minimum` distinct strings."""
    return (isinstance(value, list) and len(value) >= minimum
            and all(isinstance(v, str) for v in value) and len(set(value)) == len(value))


def job_name(body):
    """The request's job: a non-empty string, else InvalidRequest."""
    if not isinstance(body["job"], str) or not body["job"]:
        raise InvalidRequest("job must be a non-empty string")
    return body["job"]
