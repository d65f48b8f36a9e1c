import pytest

from apps.fabric_view import FabricView
from mininet_topos.description import describe
from mininet_topos.spineleaf import SpineLeafTopo


def spine_leaf_view(spines, leaves, hosts_per_leaf, bw=20):
    return FabricView(describe(SpineLeafTopo(spines=spines, leaves=leaves,
                                             hosts_per_leaf=hosts_per_leaf, bw=bw)))


@pytest.fixture
def view_4x4():
    return spine_leaf_view(4, 4, 2)
