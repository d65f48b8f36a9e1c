"""The fabrics the simulated experiments run on, as the controller's FabricView: built
from the same Mininet topologies the emulation uses (only their description, no
network is started)."""

from mininet_topos.description import describe
from mininet_topos.fattree import FatTreeTopo
from mininet_topos.spineleaf import SpineLeafTopo
from syncfabric.decisions.fabric_view import FabricView

GBIT = 1000.0   # Mbit/s


def parse_spine_leaf(text):
    """"8x8" -> (8 spines, 8 leaves)."""
    spines, leaves = (int(part) for part in text.lower().split("x"))
    return spines, leaves


def spine_leaf(spec, hosts_per_leaf, bw_mbps, **topo_options):
    spines, leaves = parse_spine_leaf(spec)
    return FabricView(describe(SpineLeafTopo(spines=spines, leaves=leaves,
                                             hosts_per_leaf=hosts_per_leaf, bw=bw_mbps,
                                             **topo_options)))


def fat_tree(k, hosts_per_edge, bw_mbps, **topo_options):
    return FabricView(describe(FatTreeTopo(k=k, hosts_per_edge=hosts_per_edge, bw=bw_mbps,
                                           **topo_options)))


def servers(view):
    """The hosts that are not aggregators, by number (h1, h2, ...)."""
    return sorted((h for h in view.hosts if h not in view.aggregators), key=lambda h: int(h[1:]))
