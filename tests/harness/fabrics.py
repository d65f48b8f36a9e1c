"""Fabric views for unit tests, from the same Mininet topologies the integration tests run."""

from mininet_topos.description import describe
from mininet_topos.spineleaf import SpineLeafTopo
from syncfabric.decisions.fabric_view import FabricView


def spine_leaf_view(spines, leaves, hosts_per_leaf, bw=20):
    return FabricView(describe(SpineLeafTopo(spines=spines, leaves=leaves,
                                             hosts_per_leaf=hosts_per_leaf, bw=bw)))
