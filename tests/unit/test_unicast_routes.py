from collections import Counter

import networkx as nx
import pytest

from syncfabric.decisions.unicast_routes import host_pair_paths, unicast_rules
from syncfabric.openflow import builders as of
from tests.harness.fabrics import spine_leaf_view
from tests.harness.fake_openflow import FakeFlowTable, fake_datapath, walk


def install(view):
    """Fake tables holding exactly the messages the controller sends each switch."""
    rules = unicast_rules(view)
    tables = {}
    for switch in view.switches:
        tables[switch] = FakeFlowTable()
        mine = [r for r in rules if r.switch == switch]
        for message in of.fabric_flow_adds(fake_datapath(), view.host_ports(switch), mine):
            tables[switch].apply(message)
    return tables


@pytest.mark.parametrize("shape", [(2, 2, 1), (4, 4, 2), (3, 5, 3)])
def test_every_host_pair_is_delivered_on_a_shortest_path(shape):
    view = spine_leaf_view(*shape)
    tables = install(view)
    for src in view.hosts:
        for dst in view.hosts:
            if src == dst:
                continue
            packet = {"eth_type": of.ETH_TYPE_IPV4, "ipv4_src": view.ip(src), "ipv4_dst": view.ip(dst)}
            visited = walk(view, tables, src, packet)
            assert visited[-1] == dst
            assert len(visited) - 1 == nx.shortest_path_length(view.graph, src, dst)


def test_paths_spread_evenly_over_spines(view_4x4):
    paths = host_pair_paths(view_4x4)
    cross = {pair: path for pair, path in paths.items() if len(path) == 3}
    for leaf in ("leaf1", "leaf4"):
        uplinks = Counter(path[1] for path in cross.values() if path[0] == leaf)
        downlinks = Counter(path[1] for path in cross.values() if path[-1] == leaf)
        assert set(uplinks) == set(downlinks) == {"spine1", "spine2", "spine3", "spine4"}
        assert max(uplinks.values()) - min(uplinks.values()) <= 1
        assert max(downlinks.values()) - min(downlinks.values()) <= 1
    from_h1 = Counter(path[1] for (src, _), path in cross.items() if src == "h1")
    assert len(from_h1) == 4 and max(from_h1.values()) - min(from_h1.values()) <= 1


def test_routes_are_deterministic(view_4x4):
    assert unicast_rules(view_4x4) == unicast_rules(spine_leaf_view(4, 4, 2))


def test_rules_match_destination_only_where_sources_agree(view_4x4):
    rules = unicast_rules(view_4x4)
    spine_rules = [r for r in rules if r.switch.startswith("spine")]
    assert spine_rules and all(r.src_ip is None for r in spine_rules)
    assert any(r.src_ip is not None for r in rules if r.switch == "leaf1")


def test_arp_from_hosts_goes_to_the_controller(view_4x4):
    tables = install(view_4x4)
    arp = {"eth_type": of.ETH_TYPE_ARP}
    assert tables["leaf1"].lookup(dict(arp, in_port=5)) == [fake_datapath().ofproto.OFPP_CONTROLLER]
    assert tables["leaf1"].lookup(dict(arp, in_port=1)) == []  # never from a spine
    assert tables["spine1"].lookup(dict(arp, in_port=1)) == []


def test_route_changes_reach_the_new_routes_in_place_and_leave_other_flows(view_4x4):
    datapath = fake_datapath()
    table, fresh = FakeFlowTable(), FakeFlowTable()
    other_app_flow = of.flow_add(datapath, 0x77, 500, datapath.ofproto_parser.OFPMatch(eth_type=0x88cc), [])
    table.apply(other_app_flow)
    before = [r for r in unicast_rules(view_4x4) if r.switch == "leaf1"]
    after = [r for r in unicast_rules(view_4x4, {frozenset(("leaf1", "spine1"))})
             if r.switch == "leaf1"]
    for message in of.fabric_flow_adds(datapath, view_4x4.host_ports("leaf1"), before):
        table.apply(message)
    changes = of.route_changes(datapath, before, after)
    assert changes and all(m.command in (datapath.ofproto.OFPFC_ADD, datapath.ofproto.OFPFC_DELETE_STRICT)
                           for m in changes)
    for message in changes:
        table.apply(message)
    for message in of.fabric_flow_adds(datapath, view_4x4.host_ports("leaf1"), after):
        fresh.apply(message)
    assert table.state() != fresh.state()   # the other app's flow is still there
    table.flows = [f for f in table.flows if f[1] != 0x77]
    assert table.state() == fresh.state()
    assert of.route_changes(datapath, after, after) == []
