"""A small JSON client for the controller's REST API (stdlib only, usable inside Mininet hosts).

It sends the token in SYNCFABRIC_REST_TOKEN (if set) with every request, and
one release key of its own with every POST and DELETE, so whatever it creates
only it may release (apps/rest_json.py). An https:// controller is verified
against the CA certificate in the file SYNCFABRIC_CA names (else the system's
CAs). With retry_s, a refused connection (the request never reached a
controller, e.g. one that is restarting) is tried again for up to retry_s seconds.

Each thread keeps one connection to the controller open between requests (HTTP/1.1
keep-alive): every worker and daemon reads its jobs twice a second, and a connection
a request cost the controller about twice and the host about four times the CPU
(docs/pytorch.md).
A request on a kept connection the controller has since closed (it restarted) is sent
again once on a new one; a POST, which is not safe to send twice, always goes on a
connection of its own."""

import copy
import http.client
import json
import os
import secrets
import ssl
import threading
import time
from urllib.parse import urlsplit

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
        self.kept = threading.local()   # .connection: this thread's, kept between requests

    def briefly(self, timeout_s):
        """This client (its token and release key) with a shorter timeout and no retry:
        for what is not worth waiting for."""
        brief = copy.copy(self)
        brief.timeout_s, brief.retry_s = min(timeout_s, self.timeout_s), 0.0
        brief.kept = threading.local()   # its own connections, with its own timeout
        return brief

    def close(self):
        """Close the connection this thread kept (a thread that stops asking)."""
        connection = getattr(self.kept, "connection", None)
        self.kept.connection = None
        if connection is not None:
            connection.close()

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
        deadline = time.monotonic() + self.retry_s
        while True:
            try:
                return self._send(method, urlsplit(self.base_url).path + path, data, headers)
            except ConnectionRefusedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def _send(self, method, path, data, headers):
        """(the decoded JSON answer, its ETag or None); ControllerHttpError for an error
        status (and for 304)."""
        if method == "POST":
            connection = self._connect()
            try:
                status, payload, etag = self._exchange(connection, method, path, data, headers)
            finally:
                connection.close()
        else:
            status, payload, etag = self._exchange_kept(method, path, data, headers)
        if status >= 300:
            try:
                payload = json.loads(payload)
            except ValueError:
                payload = payload.decode(errors="replace")
            raise ControllerHttpError(status, payload)
        return json.loads(payload or b"null"), etag

    def _exchange_kept(self, method, path, data, headers):
        """Send on this thread's kept connection (opened if it has none); once more on a
        new one if the controller closed the kept one meanwhile. A connection that
        failed otherwise (a timeout mid-answer) is closed, never used again."""
        connection = getattr(self.kept, "connection", None)
        fresh = connection is None
        if fresh:
            connection = self.kept.connection = self._connect()
        try:
            return self._exchange(connection, method, path, data, headers)
        except (ConnectionResetError, BrokenPipeError):   # RemoteDisconnected is one
            self.close()
            if fresh:
                raise
        except BaseException:
            self.close()
            raise
        return self._exchange_kept(method, path, data, headers)

    @staticmethod
    def _exchange(connection, method, path, data, headers):
        """(status, body, ETag) of one request, read whole so the connection can carry
        the next; a garbled answer is an OSError, as every other way of not reaching
        the controller is."""
        try:
            connection.request(method, path, body=data, headers=headers)
            answer = connection.getresponse()
            return answer.status, answer.read(), answer.getheader("ETag")
        except http.client.HTTPException as error:
            if isinstance(error, OSError):   # RemoteDisconnected: the caller's to handle
                raise
            raise ConnectionError("the controller's answer is not HTTP: %r" % error) from None

    def _connect(self):
        address = urlsplit(self.base_url)
        if self.tls is not None:
            return http.client.HTTPSConnection(address.hostname, address.port,
                                               timeout=self.timeout_s, context=self.tls)
        return http.client.HTTPConnection(address.hostname, address.port,
                                          timeout=self.timeout_s)

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
