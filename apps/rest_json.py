"""JSON request/response helpers shared by the apps' REST controllers (Ryu wsgi / WebOb)."""

import json

from ryu.app.wsgi import Response


class RequestError(Exception):
    """A request that is answered with `status` and a JSON {"error": message}."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def json_response(body, status=200):
    return Response(status=status, content_type="application/json", charset="utf-8",
                    body=json.dumps(body, indent=1, sort_keys=True) + "\n")


def error_response(error):
    return json_response({"error": str(error)}, status=error.status)


def read_json_body(request):
    """The request's JSON body, or RequestError(400) saying why it is not usable."""
    try:
        return json.loads(request.body or b"")
    except (UnicodeDecodeError, ValueError) as error:
        raise RequestError(400, "malformed JSON body: %s" % error) from None
