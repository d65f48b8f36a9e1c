"""fabric_check's bad-input contract: a one-line error, a non-zero exit, nothing left behind."""

import json
import os
import socket
import subprocess

import pytest

from tests.harness.fabric_check_cli import OF_PORT, REST_PORT, SMALL, assert_one_line_error, run
from tests.harness.testbeds import bridges, controllers_on_port, require_root


@pytest.mark.integration
@pytest.mark.parametrize("flag", ["--of-port", "--rest-port"])
def test_controller_port_in_use(flag):
    require_root()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        ports = {"--of-port": OF_PORT, "--rest-port": REST_PORT, flag: port}
        answer = run(*SMALL, "--of-port", str(ports["--of-port"]),
                     "--rest-port", str(ports["--rest-port"]))
    assert_one_line_error(answer, 1, "port %d is already in use" % port)
    assert not bridges() & {"spine1", "leaf1", "leaf2"}
    assert not controllers_on_port(ports["--of-port"])


@pytest.mark.integration
def test_ovs_not_running(tmp_path):
    require_root()
    fake = tmp_path / "ovs-vsctl"
    fake.write_text("#!/bin/sh\necho 'database connection failed' >&2\nexit 1\n")
    fake.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (tmp_path, os.environ["PATH"]))
    answer = run(*SMALL, "--of-port", str(OF_PORT), "--rest-port", str(REST_PORT), env=env)
    assert_one_line_error(answer, 1, "Open vSwitch is not running")
    assert not controllers_on_port(OF_PORT)


@pytest.mark.integration
def test_small_fabric_check_reports_a_healthy_fabric():
    require_root()
    answer = run(*SMALL, "--of-port", str(OF_PORT), "--rest-port", str(REST_PORT))
    assert answer.returncode == 0, answer.stderr
    report = json.loads(answer.stdout)
    assert (report["switches"], report["links"], report["hosts"]) == (3, 2, 2)
    assert report["ping_loss_pct"] == 0.0
    assert report["tcp_mbps"] >= 0.8 * report["link_mbps"]
    assert not bridges() & {"spine1", "leaf1", "leaf2"}
    assert not controllers_on_port(OF_PORT)


@pytest.mark.integration
def test_bridges_left_by_an_earlier_run_are_reported_not_touched():
    require_root()
    subprocess.run(["ovs-vsctl", "add-br", "leaf2", "--", "set", "bridge", "leaf2",
                    "datapath_type=netdev"], check=True)
    try:
        answer = run(*SMALL, "--of-port", str(OF_PORT), "--rest-port", str(REST_PORT))
        assert_one_line_error(answer, 1, "OVS already has bridges leaf2 from an earlier run")
        assert bridges() & {"spine1", "leaf1", "leaf2"} == {"leaf2"}
        assert not controllers_on_port(OF_PORT)
    finally:
        subprocess.run(["ovs-vsctl", "del-br", "leaf2"], check=True)


@pytest.mark.integration
def test_a_management_bridge_left_by_another_run_is_reported_not_touched():
    require_root()
    subprocess.run(["ip", "link", "add", "sf-mgmt0", "type", "bridge"], check=True)
    try:
        answer = run(*SMALL, "--of-port", str(OF_PORT), "--rest-port", str(REST_PORT))
        assert_one_line_error(answer, 1, "the management bridge sf-mgmt0 exists")
        assert subprocess.run(["ip", "link", "show", "sf-mgmt0"], capture_output=True).returncode == 0
        assert not bridges() & {"spine1", "leaf1", "leaf2"}
    finally:
        subprocess.run(["ip", "link", "del", "sf-mgmt0"], check=True)
