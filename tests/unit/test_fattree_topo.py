"""The fat-tree topology (mininet_topos/fattree.py), as the controller sees it."""

import pytest

from mininet_topos.description import describe
from mininet_topos.fattree import FatTreeTopo
from syncfabric.decisions.fabric_view import FabricView


def test_grids_fat_tree_has_80_switches_and_192_servers():
    view = FabricView(describe(FatTreeTopo(k=8, hosts_per_edge=6, bw=100)))
    roles = [view.graph.nodes[s]["role"] for s in view.switches]
    assert (roles.count("core"), roles.count("aggregation"), roles.count("edge")) == (16, 32, 32)
    assert len(view.hosts) == 192
    assert len({view.dpid(s) for s in view.switches}) == 80


def test_every_edge_reaches_every_core_through_its_pod():
    view = FabricView(describe(FatTreeTopo(k=4, bw=20)))
    assert view.attachment("h1")[0] == "p1e1" and view.attachment("h16")[0] == "p4e2"
    assert sorted(view.graph.successors("p1e1")) == ["h1", "h2", "p1a1", "p1a2"]
    assert sorted(n for n in view.graph.successors("p1a2") if n.startswith("c")) == ["c3", "c4"]
    assert view.out_port("c3", "p2a2") == 2 and view.out_port("p1e2", "p1a1") == 1


def test_per_link_rates_aggregators_and_bad_sizes():
    rates = [float(r) for r in range(1, 33)]
    view = FabricView(describe(FatTreeTopo(k=4, bw=rates, aggregators="edges", aggregator_bw=9)))
    switch_links = sorted(view.graph.edges[e]["capacity_mbps"] for e in view.graph.edges
                          if e[0] in view.switches and e[1] in view.switches)
    assert switch_links == sorted(rates * 2)          # both directions of each link
    assert view.graph.edges["h1", "p1e1"]["capacity_mbps"] == 32.0   # hosts: the largest
    assert sorted(view.aggregators) == ["agg-p%de%d" % (p, e) for p in range(1, 5) for e in (1, 2)]
    for bad in ({"k": 3}, {"k": 4, "bw": [1.0] * 5}, {"k": 256}):
        with pytest.raises(ValueError):
            FatTreeTopo(**bad)
