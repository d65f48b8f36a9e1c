"""Helpers shared by the unit and integration tests of leftovers."""

import subprocess
import sys

import pytest

from mininet_topos.platform_net import MANAGEMENT_BRIDGE
from tests.harness.testbeds import require_root

COMMAND = [sys.executable, "-m", "experiments.leftovers"]


def run(*args):
    return subprocess.run(COMMAND + list(args), capture_output=True, text=True, timeout=60)


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
