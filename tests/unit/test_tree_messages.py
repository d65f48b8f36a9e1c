"""A tree's OpenFlow messages, applied to fake switches that follow group buckets."""

import random

import pytest

from syncfabric.traffic_classes import BORROWED_DSCP
from syncfabric.decisions.multicast_trees import (RANDOM, compute_tree, switch_shares,
                                                  with_backup_uplinks, without_links)
from syncfabric.decisions.unicast_routes import unicast_rules
from syncfabric.openflow import builders as of
from syncfabric.openflow import steering_messages as steering
from syncfabric.openflow.tree_messages import tree_changes
from tests.harness.fabrics import spine_leaf_view
from tests.harness.fake_openflow import FakeFlowTable, fake_datapath, multicast_walk, walk

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
    for switch, share in switch_shares(view, tree).items():
        for message in tree_changes(fake_datapath(), tree_id, ADDRESS, None, share)[0]:
            tables[switch].apply(message)


def apply_all(tables, messages_of):
    for switch, messages in messages_of.items():
        for message in messages:
            tables[switch].apply(message)


def take_down(view, tables, tail, head):
    tables[tail].down_ports.add(view.out_port(tail, head))
    tables[head].down_ports.add(view.out_port(head, tail))


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
    assert band.rate == 99 and band.burst_size * 1000 >= 4 * 9042 * 8   # four jumbo frames


def test_a_tree_is_policed_once_at_its_ingress_switch_and_forwarded_by_groups_after_it():
    view = spine_leaf_view(2, 2, 2)
    tree = compute_tree(view, "h1", ["h2", "h3"], 5.0)
    shares = switch_shares(view, tree)
    assert list(shares) == ["leaf1", "spine1", "leaf2"]
    assert [share.police_mbps for share in shares.values()] == [5.0, None, None]
    ofproto = fake_datapath().ofproto
    for switch, share in shares.items():
        messages = tree_changes(fake_datapath(), 9, ADDRESS, None, share)[0]
        if switch == "leaf1":
            meter, group, flow, borrowed = messages
            metered = [i for i in flow.instructions if i.type == ofproto.OFPIT_METER]
            assert meter.flags == ofproto.OFPMF_KBPS | ofproto.OFPMF_BURST
            assert (meter.bands[0].rate, meter.bands[0].burst_size) == (5000, 500)
            assert [i.meter_id for i in metered] == [9]
            # the borrowed class's twin: same match and group, one priority up, no meter
            twin_match = dict(borrowed.match.items())
            assert twin_match.pop("ip_dscp") == BORROWED_DSCP
            assert twin_match == dict(flow.match.items())
            assert borrowed.priority == flow.priority + 1
            assert [i.type for i in borrowed.instructions] == [ofproto.OFPIT_APPLY_ACTIONS]
            assert borrowed.instructions[0].actions[0].group_id == 9
        else:
            group, flow = messages
            assert not [i for i in flow.instructions if i.type == ofproto.OFPIT_METER]
        assert group.type == ofproto.OFPGT_ALL and len(group.buckets) == len(share.out_ports)
        assert dict(flow.match.items())["in_port"] == share.in_ports[0]
        assert flow.cookie == of.multicast_cookie(9)


def test_removal_leaves_the_switch_as_before():
    view = spine_leaf_view(2, 2, 2)
    tables = fabric_tables(view)
    before = {s: tables[s].state() for s in tables}
    tree = with_backup_uplinks(view, compute_tree(view, "h1", ["h2", "h4"], 5.0))
    assert tree.backups == (("leaf1", "spine1", "spine2"),)
    install(tables, view, tree, 3)
    apply_all(tables, {switch: tree_changes(fake_datapath(), 3, ADDRESS, share, None)[1]
                       for switch, share in switch_shares(view, tree).items()})
    assert {s: tables[s].state() for s in tables} == before


def test_a_backup_uplink_is_off_the_tree_and_has_room_first():
    view = spine_leaf_view(4, 4, 1)
    tree = compute_tree(view, "h1", ["h2", "h3"], 5.0)
    (primary,) = [head for tail, head in tree.edges if tail == "leaf1"]
    # every other spine is free: the first by dpid; then one whose links are full
    # (spine2 if it is free) gives way to one with room
    others = [s for s in ["spine1", "spine2", "spine3", "spine4"] if s != primary]
    assert with_backup_uplinks(view, tree).backups == (("leaf1", primary, others[0]),)
    full = {("leaf1", others[0]): 20.0}
    assert with_backup_uplinks(view, tree, full).backups == (("leaf1", primary, others[1]),)
    # a down link rules a spine out; with no spine left there is no backup
    down = {frozenset(("leaf1", spine)) for spine in others[:2]}
    assert with_backup_uplinks(view, tree, {}, down).backups == (("leaf1", primary, others[2]),)
    down.add(frozenset((others[2], "leaf3")))
    assert with_backup_uplinks(view, tree, {}, down).backups == ()
    # receivers on the source's own leaf only: no uplink, no backup
    view_2 = spine_leaf_view(2, 2, 3)
    assert with_backup_uplinks(view_2, compute_tree(view_2, "h1", ["h2", "h3"], 5.0)).backups == ()


@pytest.mark.parametrize("policy", ["path-aware", RANDOM])
def test_the_ingress_switch_fails_over_to_the_backup_uplink_by_itself(policy):
    view = spine_leaf_view(4, 4, 2)
    tables = fabric_tables(view)
    receivers = ["h2", "h3", "h6", "h8"]
    tree = with_backup_uplinks(view, compute_tree(view, "h1", receivers, 5.0, policy=policy,
                                                  rng=random.Random(4)))
    uplinks = [head for tail, head in tree.edges if tail == "leaf1" and view.is_switch(head)]
    assert len(tree.backups) == len(uplinks)
    install(tables, view, tree, 7)
    packet = {"eth_type": of.ETH_TYPE_IPV4, "ipv4_src": "10.0.0.1", "ipv4_dst": ADDRESS}
    assert multicast_walk(view, tables, "h1", packet) == set(receivers)   # one copy each
    for _switch, primary, _backup in tree.backups:
        take_down(view, tables, "leaf1", primary)
    assert multicast_walk(view, tables, "h1", packet) == set(receivers)
    # without backups, the same failure loses the receivers behind the uplinks
    plain = fabric_tables(view)
    install(plain, view, compute_tree(view, "h1", receivers, 5.0, policy=policy,
                                      rng=random.Random(4)), 7)
    for primary in uplinks:
        take_down(view, plain, "leaf1", primary)
    assert multicast_walk(view, plain, "h1", packet) == {"h2"}


def test_a_tree_moves_make_before_break_and_ends_as_if_installed_afresh():
    view = spine_leaf_view(3, 3, 1)
    old = with_backup_uplinks(view, compute_tree(view, "h1", ["h2", "h3"], 5.0))
    (_, primary, backup), = old.backups
    down = {frozenset(("leaf1", primary))}
    new = with_backup_uplinks(view, compute_tree(view, "h1", ["h2", "h3"], 5.0,
                                                 without_links(view, {}, down)), {}, down)
    assert new.backups and new.edges != old.edges
    tables, fresh = fabric_tables(view), fabric_tables(view)
    install(tables, view, old, 5)
    install(fresh, view, new, 5)
    take_down(view, tables, "leaf1", primary)
    old_shares, new_shares = switch_shares(view, old), switch_shares(view, new)
    changes = {s: tree_changes(fake_datapath(), 5, ADDRESS, old_shares.get(s), new_shares.get(s))
               for s in set(old_shares) | set(new_shares)}
    packet = {"eth_type": of.ETH_TYPE_IPV4, "ipv4_src": "10.0.0.1", "ipv4_dst": ADDRESS}
    apply_all(tables, {s: make for s, (make, _) in changes.items()})
    assert multicast_walk(view, tables, "h1", packet) == {"h2", "h3"}   # between make and break
    apply_all(tables, {s: then_break for s, (_, then_break) in changes.items()})
    assert multicast_walk(view, tables, "h1", packet) == {"h2", "h3"}
    assert {s: tables[s].state() for s in tables} == {s: fresh[s].state() for s in fresh}


@pytest.mark.parametrize("fields", [
    steering.member_match((3, "10.0.0.1", "10.0.0.9", 4242)),
    steering.closed_match(("10.0.0.9", 4242)),
    {"in_port": 7},
    {},
    {"eth_type": 0x0800, "ip_proto": 17, "ipv4_dst": "239.1.0.7", "ipv4_src": "10.0.0.2"},
])
def test_a_shared_match_is_the_one_ryu_builds_from_keywords(fields):
    """shared_match normalizes each field once (match_field) and orders them as Ryu does:
    the same match, byte for byte, as OFPMatch(**fields)."""
    parser = fake_datapath().ofproto_parser
    shared = of.shared_match(parser, tuple(sorted(fields.items())))
    ours, ryus = bytearray(), bytearray()
    shared.serialize(ours, 0)
    parser.OFPMatch(**fields).serialize(ryus, 0)
    assert ours == ryus and dict(shared.items()) == fields
