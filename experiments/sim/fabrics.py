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


def paper_scale_fabric(rng, size=64):
    """The GRID paper's scale: a size x size spine-leaf of 1 Gbit/s links, 2 hosts per
    leaf, an aggregator (9 Gbit/s) on a random 20% of the switches; as a description."""
    switches = ["spine%d" % i for i in range(1, size + 1)] + ["leaf%d" % i for i in range(1, size + 1)]
    programmable = sorted(rng.sample(switches, len(switches) // 5))
    return describe(SpineLeafTopo(spines=size, leaves=size, hosts_per_leaf=2, bw=1000,
                                  aggregators=programmable, aggregator_bw=9000))
