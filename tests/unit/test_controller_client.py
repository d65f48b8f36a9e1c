"""The REST client a job uses: a retrying copy rides out a controller that restarts."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from syncfabric.hosts.transport.controller_client import ControllerClient


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Quiet(BaseHTTPRequestHandler):
    def send_json(self, answer, **headers):
        body = json.dumps(answer).encode()
        self.send_response(200)
        for name, value in dict(headers, **{"Content-Type": "application/json",
                                            "Content-Length": str(len(body))}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args):
        pass


class Answer(Quiet):
    def do_GET(self):   # noqa: N802 (http.server's name)
        self.send_json({"key": self.headers["X-Release-Key"],
                        "auth": self.headers["Authorization"]})


def test_a_retrying_client_waits_for_a_restarting_controller_with_the_same_key():
    port = free_port()
    client = ControllerClient("http://127.0.0.1:%d" % port, token="t0ken")
    retrying = client.retrying(retry_s=5.0)
    servers = []

    def start_later():
        time.sleep(0.4)   # the controller comes back
        servers.append(HTTPServer(("127.0.0.1", port), Answer))
        servers[0].serve_forever()
    threading.Thread(target=start_later, daemon=True).start()
    try:
        started = time.monotonic()
        answer = retrying.get("/fabric/topology")
        assert time.monotonic() - started >= 0.3
        assert answer == {"key": client.release_key, "auth": "Bearer t0ken"}
    finally:
        while not servers:
            time.sleep(0.05)
        servers[0].shutdown()
        servers[0].server_close()


def test_without_retry_a_refused_connection_fails_at_once():
    client = ControllerClient("http://127.0.0.1:%d" % free_port())
    started = time.monotonic()
    try:
        client.get("/fabric/topology")
    except OSError:
        assert time.monotonic() - started < 1.0
    else:
        raise AssertionError("a refused connection was answered")


class Tagged(Quiet):
    """{"n": 1} under ETag W/"1"; 304 to If-None-Match W/"1"."""

    def do_GET(self):   # noqa: N802 (http.server's name)
        if self.headers["If-None-Match"] == 'W/"1"':
            self.send_response(304)
            self.end_headers()
        else:
            self.send_json({"n": 1}, ETag='W/"1"')


def test_a_get_of_what_did_not_change_is_none():
    server = HTTPServer(("127.0.0.1", 0), Tagged)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = ControllerClient("http://127.0.0.1:%d" % server.server_port)
        assert client.get_changed("/jobs") == ({"n": 1}, 'W/"1"')
        assert client.get_changed("/jobs", 'W/"1"') == (None, 'W/"1"')
        assert client.get_changed("/jobs", 'W/"0"') == ({"n": 1}, 'W/"1"')
        assert client.get("/jobs") == {"n": 1}
    finally:
        server.shutdown()
        server.server_close()
