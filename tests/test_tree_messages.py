"""A tree's OpenFlow messages, applied to fake switches that follow group buckets."""

import random

import pytest

from apps import openflow_builders as of
from apps.multicast_trees import RANDOM, compute_tree, forwarding_plan, police_mbps
from apps.unicast_routes import unicast_rules
from tests.conftest import spine_leaf_view
from tests.fake_openflow import FakeFlowTable, fake_datapath, multicast_walk, walk

ADDRESS = "239.1.0.7"


def fabric_tables(view):
    rules = unicast_rules(view)
    tables = {switch: FakeFlowTable() for switch in view.switches}
    for switch, table in tables.items():
        for message in of.fabric_flow_adds(fake_datapath(), view.host_ports(switch),
                                       [r for r in rules if r.switch == switch]):
            table.apply(message)
    return tables


def install(tables, view, tree, tree_id):
    for switch, in_port, out_ports in forwarding_plan(view, tree):
        for message in of.tree_install(fake_datapath(), tree_id, ADDRESS, in_port, out_ports,
                                       police_mbps(view, tree, switch)):
            tables[switch].apply(message)


@pytest.mark.parametrize("policy", ["path-aware", RANDOM])
def test_tree_messages_deliver_one_copy_to_each_receiver_only(policy):
    view = spine_leaf_view(4, 4, 2)
    tables = fabric_tables(view)
    receivers = ["h2", "h3", "h6", "h8"]
    tree = compute_tree(view, "h1", receivers, 5.0, policy=policy, rng=random.Random(2))
    install(tables, view, tree, 7)
    packet = {"eth_type": of.ETH_TYPE_IPV4, "ipv4_src": "10.0.0.1", "ipv4_dst": ADDRESS}
    assert multicast_walk(view, tables, "h1", packet) == set(receivers)
    # unicast is untouched by the tree
    unicast = {"eth_type": of.ETH_TYPE_IPV4, "ipv4_src": "10.0.0.1", "ipv4_dst": "10.0.0.5"}
    assert walk(view, tables, "h1", unicast)[-1] == "h5"


def test_a_slow_meter_s_bucket_still_holds_full_size_frames():
    # 0.1 s at 99 kbit/s is 9.9 kbit, less than one 1514-byte frame (12.1 kbit): such a
    # bucket never passes a full datagram, so the burst has a floor of a few frames
    (band,) = of.meter_add(fake_datapath(), 7, 0.099).bands
    assert band.rate == 99 and band.burst_size * 1000 >= 4 * 1514 * 8


def test_a_tree_is_policed_once_at_its_ingress_switch_and_forwarded_by_groups_after_it():
    view = spine_leaf_view(2, 2, 2)
    tree = compute_tree(view, "h1", ["h2", "h3"], 5.0)
    plan = forwarding_plan(view, tree)
    assert [switch for switch, _, _ in plan] == ["leaf1", "spine1", "leaf2"]
    assert [police_mbps(view, tree, switch) for switch, _, _ in plan] == [5.0, None, None]
    ofproto = fake_datapath().ofproto
    for switch, in_port, out_ports in plan:
        *meter, group, flow = of.tree_install(fake_datapath(), 9, ADDRESS, in_port, out_ports,
                                              police_mbps(view, tree, switch))
        metered = [i for i in flow.instructions if i.type == ofproto.OFPIT_METER]
        if switch == "leaf1":
            assert meter[0].flags == ofproto.OFPMF_KBPS | ofproto.OFPMF_BURST
            assert (meter[0].bands[0].rate, meter[0].bands[0].burst_size) == (5000, 500)
            assert [i.meter_id for i in metered] == [9]
        else:
            assert meter == [] and metered == []
        assert group.type == ofproto.OFPGT_ALL and len(group.buckets) == len(out_ports)
        assert dict(flow.match.items())["in_port"] == in_port
        assert flow.cookie == of.multicast_cookie(9)


def test_removal_leaves_the_switch_as_before():
    view = spine_leaf_view(2, 2, 2)
    tables = fabric_tables(view)
    before = {s: (list(t.flows), dict(t.groups), dict(t.meters)) for s, t in tables.items()}
    tree = compute_tree(view, "h1", ["h2", "h4"], 5.0)
    install(tables, view, tree, 3)
    for switch, _, _ in forwarding_plan(view, tree):
        for message in of.tree_removal(fake_datapath(), 3, police_mbps(view, tree, switch) is not None):
            tables[switch].apply(message)
    assert {s: (list(t.flows), dict(t.groups), dict(t.meters)) for s, t in tables.items()} == before
