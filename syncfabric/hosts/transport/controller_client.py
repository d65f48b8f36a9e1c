"""A small JSON client for the controller's REST API (stdlib only, usable inside Mininet hosts).

It sends the token in SYNCFABRIC_REST_TOKEN (if set) with every request, and
one release key of its own with every POST and DELETE, so whatever it creates
only it may release (apps/rest_json.py). An https:// controller is verified
against the CA certificate in the file SYNCFABRIC_CA names (else the system's
CAs). With retry_s, a refused connection (the request never reached a
controller, e.g. one that is restarting) is tried again for up to retry_s seconds."""

import copy
import json
import os
import secrets
import ssl
import time
import urllib.error
import urllib.request

TOKEN_ENV = "SYNCFABRIC_REST_TOKEN"
CA_ENV = "SYNCFABRIC_CA"
RESTART_GRACE_S = 30.0   # retry_s for a job that rides out a controller restart
ADMISSION_TIMEOUT_S = 60.0   # timeout_s of a client that creates jobs: under the fair
#                              policy, POST /jobs waits until the jobs it shares with have
#                              slowed to their new shares (a round of theirs, at most 30 s)


class ControllerHttpError(RuntimeError):
    """The controller answered with an error status; `status` and `body` say which."""

    def __init__(self, status, body):
        super().__init__("HTTP %d: %s" % (status, body.get("error", body) if isinstance(body, dict)
                                          else body))
        self.status = status
        self.body = body


def verifying_context():
    """TLS that verifies the controller's certificate and name: against SYNCFABRIC_CA's
    file if set (a deployment's own CA), else the system's CAs."""
    return ssl.create_default_context(cafile=os.environ.get(CA_ENV) or None)


class ControllerClient:
    def __init__(self, base_url, timeout_s=10.0, token=None, retry_s=0.0):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.retry_s = retry_s
        self.token = token if token is not None else os.environ.get(TOKEN_ENV)
        self.release_key = secrets.token_urlsafe(16)
        self.tls = verifying_context() if self.base_url.startswith("https://") else None

    def briefly(self, timeout_s):
        """This client (its token and release key) with a shorter timeout and no retry:
        for what is not worth waiting for."""
        brief = copy.copy(self)
        brief.timeout_s, brief.retry_s = min(timeout_s, self.timeout_s), 0.0
        return brief

    def request(self, method, path, body=None, raw_body=None):
        """Send `body` as JSON (or `raw_body` bytes as is); return the decoded JSON answer."""
        return self._request(method, path, body, raw_body)[0]

    def get_changed(self, path, etag=None):
        """GET `path` unless it is what the answer that carried `etag` said (If-None-Match):
        (the decoded answer, its ETag), or (None, etag) when the controller says 304."""
        try:
            return self._request("GET", path, headers={"If-None-Match": etag} if etag else {})
        except ControllerHttpError as error:
            if error.status == 304:
                return None, etag
            raise

    def _request(self, method, path, body=None, raw_body=None, headers=()):
        data = raw_body if raw_body is not None else (
            None if body is None else json.dumps(body).encode())
        headers = dict(headers, **{"Content-Type": "application/json",
                                   "X-Release-Key": self.release_key})
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        request = urllib.request.Request(self.base_url + path, data=data, method=method,
                                         headers=headers)
        deadline = time.monotonic() + self.retry_s
        while True:
            try:
                return self._send(request)
            except urllib.error.URLError as error:
                refused = isinstance(getattr(error, "reason", None), ConnectionRefusedError)
                if not refused or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _send(self, request):
        """(the decoded JSON answer, its ETag or None)."""
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s,
                                        context=self.tls) as answer:
                return json.loads(answer.read() or b"null"), answer.headers.get("ETag")
        except urllib.error.HTTPError as error:
            payload = error.read()
            try:
                payload = json.loads(payload)
            except ValueError:
                payload = payload.decode(errors="replace")
            raise ControllerHttpError(error.code, payload) from None

    def retrying(self, retry_s=RESTART_GRACE_S):
        """A client with this one's address, token and release key that tries a refused
        connection again for up to retry_s seconds."""
        client = ControllerClient(self.base_url, self.timeout_s, self.token, retry_s)
        client.release_key = self.release_key
        return client

    def get(self, path):
        return self.request("GET", path)

    def put(self, path, body):
        return self.request("PUT", path, body)
