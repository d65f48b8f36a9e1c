"""JSON request/response helpers shared by the apps' REST controllers (Ryu wsgi / WebOb)."""

import json

from ryu.app.wsgi import Response


class RequestError(Exception):
    """A request answered with `status` and JSON {"error": message, **details}."""

    def __init__(self, status, message, **details):
        super().__init__(message)
        self.status = status
        self.details = details


def positive_number(value):
    """True for a JSON number > 0 (not a boolean)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value > 0


def check_fields(body, allowed, required):
    """RequestError(400) unless body is a JSON object with every required field and no
    field outside `allowed`."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request must be a JSON object")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise RequestError(400, "unknown field(s): %s" % ", ".join(unknown))
    missing = sorted(set(required) - set(body))
    if missing:
        raise RequestError(400, "missing field(s): %s" % ", ".join(missing))


def json_response(body, status=200):
    return Response(status=status, content_type="application/json", charset="utf-8",
                    body=json.dumps(body, indent=1, sort_keys=True) + "\n")


def _not_json(constant):
    raise ValueError("%s is not JSON (RFC 8259 has no NaN or Infinity)" % constant)


def read_json_body(request):
    """The request's JSON body, or RequestError(400) saying why it is not usable. Python's
    parser takes NaN and Infinity; RFC 8259 does not, and neither do we."""
    try:
        return json.loads(request.body or b"", parse_constant=_not_json)
    except (UnicodeDecodeError, ValueError) as error:
        raise RequestError(400, "malformed JSON body: %s" % error) from None


def answer(handler):
    """Run handler() -> (body, status); a RequestError becomes its JSON error response."""
    try:
        body, status = handler()
    except RequestError as error:
        return json_response(dict(error.details, error=str(error)), status=error.status)
    return json_response(body, status)
