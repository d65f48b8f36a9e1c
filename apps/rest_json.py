"""JSON request/response helpers shared by the apps' REST controllers (Ryu wsgi / WebOb),
and who may change what.

- Listening: unless ryu-manager is given --wsapi-host, the REST API listens on
  loopback only (Ryu's own default is every interface). Beyond loopback it
  refuses to start without a token (check_listening). The testbed passes
  --wsapi-host 0.0.0.0 so that programs in Mininet hosts reach it over the
  management network, and it sets a token.
- Token: SYNCFABRIC_REST_TOKEN in ryu-manager's environment, or
  SYNCFABRIC_REST_TOKEN_FILE naming a file that holds it, or `rest_token = ...`
  in a ryu-manager --config-file (Ryu parses its command line before it loads
  apps, so no flag of ours). With a token, every request that changes state
  (POST, PUT, DELETE) must carry `Authorization: Bearer TOKEN`, else 401, and so
  must every GET from beyond loopback; SYNCFABRIC_REST_OPEN_READS=1 opens
  /metrics, /openapi.json and /ui to anyone who reaches the API (a Prometheus
  server, a browser). GETs from loopback stay open.
- Ownership: what a POST creates (a tree, round or plan) belongs to the
  release key the POST carried in `X-Release-Key` (or, without one, a new key
  the answer returns as `release_key`); its DELETE must carry that key, else
  403, so a client releases only what it created. Leases and fabric changes
  release anything. syncfabric/hosts/transport/controller_client.py sends the token and one
  key per client for you.
"""

import functools
import hmac
import ipaddress
import json
import os
import secrets
import time
from pathlib import Path

from ryu import cfg
from ryu.app.wsgi import ControllerBase, Response, route

from syncfabric.errors import (Conflict, InstallFailed, InvalidRequest, NotFound, NotReady,
                               ServiceError)

TOKEN_ENV = "SYNCFABRIC_REST_TOKEN"
TOKEN_FILE_ENV = "SYNCFABRIC_REST_TOKEN_FILE"
OPEN_READS_ENV = "SYNCFABRIC_REST_OPEN_READS"
OPEN_READ_PATHS = ("/metrics", "/openapi.json", "/ui")   # what OPEN_READS opens
METRICS_KEY = "metrics"
STATUS_OF = {InvalidRequest: 400, NotFound: 404, Conflict: 409, InstallFailed: 500, NotReady: 503}
STATE_CHANGING = ("POST", "PUT", "DELETE")
cfg.CONF.set_default("wsapi_host", "127.0.0.1")
if "rest_token" not in cfg.CONF:
    cfg.CONF.register_opt(cfg.StrOpt("rest_token", default=None, secret=True,
                                     help="token that POST, PUT and DELETE must carry"))


class RequestError(Exception):
    """A request answered with `status` and JSON {"error": message, **details}."""

    def __init__(self, status, message, **details):
        super().__init__(message)
        self.status = status
        self.details = details


def json_response(body, status=200):
    return Response(status=status, content_type="application/json", charset="utf-8",
                    body=json.dumps(body, sort_keys=True) + "\n")


def _not_json(constant):
    raise ValueError("%s is not JSON (RFC 8259 has no NaN or Infinity)" % constant)


def read_json_body(request):
    """The request's JSON body, or RequestError(400) saying why it is not usable. Python's
    parser takes NaN and Infinity; RFC 8259 does not, and neither do we."""
    try:
        return json.loads(request.body or b"", parse_constant=_not_json)
    except (UnicodeDecodeError, ValueError) as error:
        raise RequestError(400, "malformed JSON body: %s" % error) from None


def configured_token():
    """The token from the environment, the file it names, or the config file; None."""
    path = os.environ.get(TOKEN_FILE_ENV)
    return os.environ.get(TOKEN_ENV) or (token_in_file(path) if path else None) \
        or cfg.CONF.rest_token


@functools.lru_cache(maxsize=4)
def token_in_file(path):
    """The token a file holds (read once), SystemExit saying why if it holds none."""
    try:
        token = Path(path).read_text().strip()
    except OSError as error:
        raise SystemExit("syncfabric: %s names %s, which cannot be read: %s"
                         % (TOKEN_FILE_ENV, path, error)) from None
    if not token:
        raise SystemExit("syncfabric: %s names %s, which is empty" % (TOKEN_FILE_ENV, path))
    return token


def is_loopback(host):
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def check_listening():
    """SystemExit, before anything listens, if the REST API would be reachable beyond
    loopback without a token: anyone who reached it could create jobs until the
    fabric is full, and read every job."""
    host = cfg.CONF.wsapi_host
    if not is_loopback(host) and not configured_token():
        raise SystemExit(
            "syncfabric: the REST API would listen on %s without a token. Set %s (or %s, a "
            "file holding it, or rest_token in a ryu-manager --config-file) and give the "
            "token to the hosts in the same variable, or leave --wsapi-host out to listen on "
            "loopback only (docs/controller.md)" % (host, TOKEN_ENV, TOKEN_FILE_ENV))


def check_token(request):
    """RequestError(401) unless a request that needs the configured token carries it:
    every state-changing one, and a read from beyond loopback (but the operator's
    OPEN_READ_PATHS where OPEN_READS_ENV opens them)."""
    token = configured_token()
    if not token or not needs_token(request):
        return
    given = request.headers.get("Authorization", "")
    if not hmac.compare_digest(given.encode(), ("Bearer " + token).encode()):
        raise RequestError(401, "this request %s: send Authorization: Bearer <token> (the "
                                "controller's %s)" % (
                                    "changes state" if request.method in STATE_CHANGING
                                    else "reads from beyond loopback", TOKEN_ENV))


def token_refusal(request):
    """The 401 response for a request without the token it needs; None if it may go on."""
    try:
        check_token(request)
    except RequestError as error:
        return error_response(error, error.status)
    return None


def needs_token(request):
    if request.method in STATE_CHANGING:
        return True
    if is_loopback(request.remote_addr or ""):
        return False
    opened = os.environ.get(OPEN_READS_ENV, "") not in ("", "0", "false", "no")
    return not (opened and request.path.startswith(OPEN_READ_PATHS))


def release_key_of(request):
    """The key a POST's creation will belong to: the one it carries, or a new one."""
    return request.headers.get("X-Release-Key") or secrets.token_urlsafe(16)


def check_release_key(request, key, what):
    """RequestError(403) unless the request carries `what`'s release key (None: a thing
    no client created, e.g. a SELMCAST round's tree)."""
    given = request.headers.get("X-Release-Key", "")
    if key is None or not hmac.compare_digest(given.encode(), key.encode()):
        raise RequestError(403, "%s was created by another client: send the release_key its "
                                "POST answered in X-Release-Key" % what)


def answer(request, handler):
    """Run handler() -> (body, status); a refusal becomes its JSON error response, with
    the status of its kind."""
    try:
        body, status = handler()
    except RequestError as error:
        return error_response(error, error.status)
    except ServiceError as error:
        return error_response(error, STATUS_OF[type(error)])
    return json_response(body, status)


def error_response(error, status):
    """A refusal (RequestError, ServiceError) as its JSON answer: its message and details."""
    return json_response(dict(error.details, error=str(error)), status=status)


class RestApi(ControllerBase):
    """The base of our REST controllers: `data` is what the app registered them with, and
    data[METRICS_KEY] the Metrics their answers are counted in."""

    def __init__(self, req, link, data, **config):
        super().__init__(req, link, data, **config)
        self.data = data
        self.metrics = data[METRICS_KEY]


def counted_route(name, path, methods):
    """Ryu's @route, with the token checked (check_token: every route goes through here)
    and every answer counted in syncfabric_rest_requests_total by the route's template
    (not the concrete path: ids would make a series each)."""
    def decorate(handler):
        @functools.wraps(handler)
        def counted(self, req, **kwargs):
            status = 500
            try:
                response = token_refusal(req) or handler(self, req, **kwargs)
                status = response.status_int
                return response
            finally:
                self.metrics.rest_requests.labels(path, req.method, str(status)).inc()
        return route(name, path, methods=methods)(counted)
    return decorate


def resource_api(name, collection, key):
    """A Ryu wsgi controller class for one collection of things clients create (trees,
    rounds, plans): POST creates, GET lists and shows, DELETE releases, each through the
    service registered under `key`: create(body, release_key, now), list(now),
    show(id, now), owner_key(id), release(id, now). Creations, 409 refusals and
    releases are counted in the metrics under `collection` (None: the collection is
    `name` itself, at the top, as /jobs)."""
    path = "/%s" % name if collection is None else "/%s/%s" % (name, collection)
    item, collection = path + "/{item_id}", collection or name
    what = collection.rstrip("s")

    class ResourceApi(RestApi):
        __doc__ = "POST/GET %s, GET/DELETE %s" % (path, item)

        @property
        def service(self):
            return self.data[key]

        @counted_route(name, path, methods=["POST"])
        def create(self, req, **_kwargs):
            response = answer(req, lambda: (self.service.create(
                read_json_body(req), release_key_of(req), time.monotonic()), 201))
            if response.status_int in (201, 409):
                counter = self.metrics.admissions if response.status_int == 201 else self.metrics.refusals
                counter.labels(collection).inc()
            return response

        @counted_route(name, path, methods=["GET"])
        def list_all(self, req, **_kwargs):
            return answer(req, lambda: (self.service.list(time.monotonic()), 200))

        @counted_route(name, item, methods=["GET"])
        def show(self, req, item_id, **_kwargs):
            return answer(req, lambda: (self.service.show(item_id, time.monotonic()), 200))

        @counted_route(name, item, methods=["DELETE"])
        def delete(self, req, item_id, **_kwargs):
            def release():
                check_release_key(req, self.service.owner_key(item_id), "%s %s" % (what, item_id))
                released = self.service.release(item_id, time.monotonic())
                self.metrics.releases.labels(collection, "request").inc()
                return {"released": released}, 200
            return answer(req, release)

    ResourceApi.__name__ = ResourceApi.__qualname__ = "%sRestApi" % name.capitalize()
    return ResourceApi
