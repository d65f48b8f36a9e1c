"""experiments.leftovers: what a dead run left is removed before the next run; a live run,
and what is not ours, are left alone."""

import subprocess
import sys

import pytest

from mininet_topos.fattree import FatTreeTopo
from mininet_topos.grid_example import GridExampleTopo
from mininet_topos.inart_example import InartExampleTopo
from mininet_topos.platform_net import FABRIC_SWITCH_NAME, MANAGEMENT_BRIDGE, root_links
from mininet_topos.spineleaf import SpineLeafTopo
from tests.conftest import bridges, require_root

COMMAND = [sys.executable, "-m", "experiments.leftovers"]


def run(*args):
    return subprocess.run(COMMAND + list(args), capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("topo", [SpineLeafTopo(spines=2, leaves=3, hosts_per_leaf=1, bw=10),
                                  FatTreeTopo(k=4), GridExampleTopo(), InartExampleTopo()],
                         ids=["spineleaf", "fattree", "grid", "inart"])
def test_every_topology_names_its_switches_so_a_clean_up_finds_them(topo):
    assert all(FABRIC_SWITCH_NAME.match(name) for name in topo.switches())


def test_names_of_other_bridges_are_not_ours():
    assert not any(FABRIC_SWITCH_NAME.match(name) for name in ("br0", "ovs-netdev", "sf-user", "spine"))


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
