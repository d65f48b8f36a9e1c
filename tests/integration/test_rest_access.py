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
