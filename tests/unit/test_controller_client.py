"""The REST client a job uses: a retrying copy rides out a controller that restarts."""

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer, ThreadingHTTPServer

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


class KeptAlive(Quiet):
    """HTTP/1.1: answers on the connection it was asked on, and notes each connection's
    client port in the server's `ports`; a server with `drop_after` set closes every
    connection, without a word, once it has answered that many requests on it."""
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        self.answered = 0

    def answer(self):
        self.server.ports.append(self.client_address[1])
        self.send_json({"n": len(self.server.ports)})
        self.answered += 1
        if self.answered == getattr(self.server, "drop_after", None):
            self.close_connection = True

    do_GET = do_PUT = do_POST = answer   # noqa: N815 (http.server's names)


def kept_alive_server(**attributes):
    server = ThreadingHTTPServer(("127.0.0.1", 0), KeptAlive)
    server.daemon_threads = True
    server.ports = []
    for name, value in attributes.items():
        setattr(server, name, value)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_thread_asks_again_on_the_connection_it_kept():
    server = kept_alive_server()
    try:
        client = ControllerClient("http://127.0.0.1:%d" % server.server_port)
        assert [client.get("/jobs")["n"] for _ in range(5)] == [1, 2, 3, 4, 5]
        client.put("/jobs/1/lease", {"ttl_s": 5})
        assert len(set(server.ports)) == 1   # one connection carried all six
        client.close()
    finally:
        server.shutdown()
        server.server_close()


def test_a_post_goes_on_a_connection_of_its_own():
    server = kept_alive_server()
    try:
        client = ControllerClient("http://127.0.0.1:%d" % server.server_port)
        client.get("/jobs")
        client.request("POST", "/jobs", {"workers": ["h1"]})
        client.request("POST", "/jobs", {"workers": ["h1"]})
        client.get("/jobs")
        assert len(set(server.ports)) == 3   # the kept one, and one for each POST
        assert server.ports[0] == server.ports[3]
        client.close()
    finally:
        server.shutdown()
        server.server_close()


def test_a_kept_connection_the_controller_closed_is_replaced_without_an_error():
    server = kept_alive_server(drop_after=1)   # as a controller that restarted does
    try:
        client = ControllerClient("http://127.0.0.1:%d" % server.server_port)
        assert [client.get("/jobs")["n"] for _ in range(3)] == [1, 2, 3]
        assert len(set(server.ports)) == 3
        client.close()
    finally:
        server.shutdown()
        server.server_close()
