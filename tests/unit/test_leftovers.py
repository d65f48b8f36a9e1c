"""experiments.leftovers: what a dead run left is removed before the next run; a live run,
and what is not ours, are left alone."""

import pytest

from mininet_topos.fattree import FatTreeTopo
from mininet_topos.grid_example import GridExampleTopo
from mininet_topos.inart_example import InartExampleTopo
from mininet_topos.platform_net import FABRIC_SWITCH_NAME
from mininet_topos.spineleaf import SpineLeafTopo


@pytest.mark.parametrize("topo", [SpineLeafTopo(spines=2, leaves=3, hosts_per_leaf=1, bw=10),
                                  FatTreeTopo(k=4), GridExampleTopo(), InartExampleTopo()],
                         ids=["spineleaf", "fattree", "grid", "inart"])
def test_every_topology_names_its_switches_so_a_clean_up_finds_them(topo):
    assert all(FABRIC_SWITCH_NAME.match(name) for name in topo.switches())


def test_names_of_other_bridges_are_not_ours():
    assert not any(FABRIC_SWITCH_NAME.match(name) for name in ("br0", "ovs-netdev", "sf-user", "spine"))
