"""Where the REST API listens, for real (apps/rest_json.py); who may change what is tested
in-process, in tests/unit/test_requests.py."""

import os
import socket
import subprocess
import time

import pytest

from experiments.testbed import ryu_manager_command, wait_until
from syncfabric.hosts.controller_client import ControllerClient
from tests.harness.testbeds import require_root

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16664, 18091


def test_without_wsapi_host_the_api_answers_on_loopback_only():
    require_root()
    port = REST_PORT + 100
    process = subprocess.Popen([ryu_manager_command(), "--wsapi-port", str(port),
                                "--ofp-tcp-listen-port", str(OF_PORT + 100), "apps.fabric_controller"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def answers():
            try:
                return ControllerClient("http://127.0.0.1:%d" % port).get("/fabric/topology")
            except OSError:
                return False
        wait_until(answers, 20, "the REST API")
        listening = subprocess.run(["ss", "-ltnH", "sport = :%d" % port], capture_output=True,
                                   text=True, check=True).stdout.split()
        assert "127.0.0.1:%d" % port in listening and "0.0.0.0:%d" % port not in listening
        outside = socket.gethostbyname(socket.gethostname())
        if not outside.startswith("127."):
            with pytest.raises(OSError):
                socket.create_connection((outside, port), timeout=2).close()
    finally:
        process.terminate()
        process.wait(timeout=10)
        time.sleep(0.2)


def test_beyond_loopback_without_a_token_the_controller_does_not_start():
    """Anyone who reached it could fill the fabric with jobs: it says how to set one."""
    require_root()
    port = REST_PORT + 200
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SYNCFABRIC_REST")}
    ended = subprocess.run([ryu_manager_command(), "--wsapi-host", "0.0.0.0", "--wsapi-port",
                            str(port), "--ofp-tcp-listen-port", str(OF_PORT + 200),
                            "apps.fabric_controller"], capture_output=True, text=True,
                           timeout=60, env=environment)
    assert ended.returncode != 0
    assert "would listen on 0.0.0.0 without a token. Set SYNCFABRIC_REST_TOKEN" in ended.stderr
    listening = subprocess.run(["ss", "-ltnH", "sport = :%d" % port], capture_output=True,
                               text=True, check=True).stdout
    assert listening.strip() == ""


def certificates(folder):
    """A CA, and a certificate it signed for 127.0.0.1 with its key: (ca, cert, key)."""
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    cert, key, request = folder / "server.pem", folder / "server.key", folder / "server.csr"
    names = folder / "names.cnf"
    names.write_text("subjectAltName = IP:127.0.0.1\n")
    for command in (
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
             "/CN=syncfabric test CA", "-keyout", ca_key, "-out", ca],
            ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", key, "-out", request],
            ["openssl", "x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key,
             "-CAcreateserial", "-days", "1", "-extfile", names, "-out", cert]):
        subprocess.run([str(part) for part in command], check=True, capture_output=True)
    return ca, cert, key


def test_the_api_over_tls_is_verified_against_the_deployments_ca(tmp_path, monkeypatch):
    require_root()
    ca, cert, key = certificates(tmp_path)
    port = REST_PORT + 300
    environment = dict(os.environ, SYNCFABRIC_REST_CERT=str(cert), SYNCFABRIC_REST_KEY=str(key))
    process = subprocess.Popen([ryu_manager_command(), "--wsapi-port", str(port),
                                "--ofp-tcp-listen-port", str(OF_PORT + 300), "apps.fabric_controller"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment)
    url = "https://127.0.0.1:%d" % port
    try:
        monkeypatch.setenv("SYNCFABRIC_CA", str(ca))

        def answers():
            try:
                return ControllerClient(url).get("/fabric/topology") is not None
            except OSError:
                return False
        wait_until(answers, 20, "the REST API over TLS")
        monkeypatch.delenv("SYNCFABRIC_CA")   # the system's CAs do not know ours
        with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
            ControllerClient(url).get("/fabric/topology")
        with pytest.raises(OSError):   # nor does it answer plain HTTP
            ControllerClient("http://127.0.0.1:%d" % port).get("/fabric/topology")
    finally:
        process.terminate()
        process.wait(timeout=10)
