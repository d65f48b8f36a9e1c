"""experiments.leftovers: what a dead run left is removed before the next run; a live run,
and what is not ours, are left alone."""

import subprocess

import pytest

from mininet_topos.platform_net import MANAGEMENT_BRIDGE, root_links
from tests.harness.leftovers import run
from tests.harness.testbeds import bridges, require_root


@pytest.mark.integration
def test_what_a_dead_run_left_is_removed_and_nothing_else(dead_run):
    dry = run("--dry-run")
    assert dry.returncode == 0 and "leaf7, leaf7-eth1" in dry.stderr, dry.stderr
    assert "leaf7" in bridges()
    answer = run()
    assert answer.returncode == 0, answer.stderr
    assert "removing" in answer.stderr and "br-user" not in answer.stderr
    assert "leaf7" not in bridges() and "br-user" in bridges()
    links = root_links()
    assert not {"leaf7-eth1", "spine7-eth1", MANAGEMENT_BRIDGE} & set(links)
    assert run().stderr == ""


@pytest.mark.integration
def test_a_live_run_is_reported_and_nothing_is_touched(dead_run):
    host_shell = subprocess.Popen(["bash", "-c", "exec -a 'bash --norc -is mininet:h9' sleep 60"])
    try:
        answer = run()
    finally:
        host_shell.kill()
        host_shell.wait()
    assert answer.returncode == 1
    (line,) = answer.stderr.strip().splitlines()
    assert "an emulation is running (pids %d)" % host_shell.pid in line and "mn -c" in line
    assert {"leaf7", "br-user"} <= bridges() and MANAGEMENT_BRIDGE in root_links()


@pytest.fixture
def dead_run():
    """A bridge, a switch-side veth and the management bridge, as a killed run leaves them,
    next to a bridge that is not ours."""
    require_root()
    commands = [["ovs-vsctl", "add-br", "leaf7", "--", "set", "bridge", "leaf7", "datapath_type=netdev"],
                ["ovs-vsctl", "add-br", "br-user", "--", "set", "bridge", "br-user",
                 "datapath_type=netdev"],
                ["ip", "link", "add", "leaf7-eth1", "type", "veth", "peer", "name", "spine7-eth1"],
                ["ip", "link", "add", MANAGEMENT_BRIDGE, "type", "bridge"]]
    for command in commands:
        subprocess.run(command, check=True)
    yield
    subprocess.run(["ovs-vsctl", "--if-exists", "del-br", "leaf7"])
    subprocess.run(["ovs-vsctl", "--if-exists", "del-br", "br-user"])
    for link in ("leaf7-eth1", MANAGEMENT_BRIDGE):
        subprocess.run(["ip", "link", "del", link], capture_output=True)
