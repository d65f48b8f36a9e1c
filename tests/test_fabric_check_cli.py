"""fabric_check's bad-input contract: a one-line error, a non-zero exit, nothing left behind."""

import json
import os
import socket
import subprocess
import sys

import pytest

from tests.conftest import bridges, controllers_on_port, require_root

COMMAND = [sys.executable, "-m", "experiments.fabric_check"]
SMALL = ["--spines", "1", "--leaves", "2", "--hosts-per-leaf", "1", "--tcp-seconds", "2"]
OF_PORT, REST_PORT = 16654, 18081


def run(*args, env=None):
    return subprocess.run(COMMAND + list(args), capture_output=True, text=True, timeout=300, env=env)


def assert_one_line_error(answer, status, text):
    assert answer.returncode == status
    lines = answer.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], answer.stderr


def test_help_describes_the_flags():
    answer = run("--help")
    assert answer.returncode == 0 and "--hosts-per-leaf" in answer.stdout


def test_unknown_parameter():
    assert_one_line_error(run("--switches", "4"), 2, "unrecognized arguments: --switches 4")


@pytest.mark.parametrize("flag, value, message", [
    ("--spines", "0", "spines must be an integer between 1 and 4095, got 0"),
    ("--leaves", "-2", "leaves must be an integer between 1 and 4095, got -2"),
    ("--bw", "0", "bw must be a positive number of Mbit/s"),
])
def test_zero_or_negative_sizes(flag, value, message):
    assert_one_line_error(run(flag, value), 1, message)


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
