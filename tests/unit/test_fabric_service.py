"""The fabric service in-process on fake switches: switches sync, reconnect with only
the difference, a restarted controller restores what it had, and a switch the
description lacks gets nothing."""

import logging
from types import SimpleNamespace

from ryu.controller import ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER
from ryu.lib import hub

from syncfabric.openflow import builders as of
from syncfabric.openflow.tree_messages import failover_group_id
from tests.harness.fake_controller import InProcessController, description
from tests.harness.fake_openflow import FakeDatapath
from tests.harness.in_process import (NOTHING_LISTED, PLAN, TREE, changes_sent, delivered, empty,
                                      listed, post, release_key)


def test_every_switch_syncs_and_a_tree_reaches_its_receivers_then_leaves_nothing(controller):
    topology = controller.request("GET", "/fabric/topology")[1]
    assert all(s["connected"] and s["synced"] for s in topology["switches"])
    status, tree = controller.request("POST", "/multicast/trees", TREE)
    assert status == 201, tree
    assert delivered(controller, tree) == {"h2", "h3", "h4"}
    status, answer = controller.request("DELETE", "/multicast/trees/%d" % tree["id"],
                                        headers={"X-Release-Key": tree["release_key"]})
    assert status == 200 and answer["released"]["id"] == tree["id"]
    assert empty(controller)


def test_a_switch_the_description_lacks_gets_nothing_logged_once_counted_each_time(
        controller, caplog):
    stranger = FakeDatapath(0xBAD5EED, controller.network)
    with caplog.at_level(logging.WARNING):
        for _connection in range(3):
            controller._event(ofp_event.EventOFPSwitchFeatures(SimpleNamespace(datapath=stranger)),
                              CONFIG_DISPATCHER)
            controller.settle()
    assert stranger.sent == [] and not stranger.table.flows
    assert caplog.text.count("dpid 0xbad5eed is not in the fabric description") == 1
    registry = controller.services.metrics.registry
    assert registry.get_sample_value("syncfabric_unknown_switch_connections_total") == 3
    assert b"syncfabric_unknown_switch_connections_total 3.0" in \
        controller.response("GET", "/metrics").body


def test_a_reconnecting_switch_gets_the_live_trees_and_plans_back(controller):
    _, tree = post(controller, "/multicast/trees", TREE)
    _, plan = post(controller, "/ina/plans", {"job": "j", "workers": ["h1", "h2", "h3"],
                                              "ps": "h4", "gradient_mb": 1})
    held = controller.state()
    assert held["leaf2"]["groups"] and held["leaf2"]["meters"]
    controller.connect("leaf2")   # a restarted switch: an empty table
    assert controller.state() == held
    assert delivered(controller, tree) == {"h2", "h3", "h4"}
    del plan


def test_a_restarted_controller_restores_trees_rounds_and_plans():
    first = InProcessController(description())
    try:
        _, tree = post(first, "/multicast/trees", dict(TREE, bandwidth_mbps=2, ttl_s=300))
        _, plan = post(first, "/ina/plans", PLAN)
        _, round_ = post(first, "/selmcast/rounds", {"job": "r", "workers": ["h1", "h2", "h3"],
                                                     "update_mb": 0.1, "p": 1, "k": 1})
        assert "id" in plan and "id" in round_
        before, held = listed(first), first.state()
        saved = first.services.store.saved
    finally:
        first.close()
    restarted = InProcessController(store=type(first.services.store)(saved))
    try:
        restarted.connect_all()
        after = listed(restarted)
        assert after["rounds"] == before["rounds"] and after["plans"] == before["plans"]
        assert [t["id"] for t in after["trees"]] == [t["id"] for t in before["trees"]]
        assert 0 < after["trees"][0]["reservation"]["expires_in_s"] <= 300
        assert restarted.state() == held and delivered(restarted, tree) == {"h2", "h3", "h4"}
        # the job's history came back: its next round is its second
        code, _ = restarted.request("DELETE", "/selmcast/rounds/%d" % round_["id"],
                                    headers=release_key(round_))
        assert code == 200
        _, second = post(restarted, "/selmcast/rounds", {"job": "r", "workers": ["h1", "h2", "h3"],
                                                         "update_mb": 0.1, "p": 1, "k": 1})
        assert second["round"] == 2 and second["id"] > round_["id"]
        code, _ = restarted.request("DELETE", "/ina/plans/%d" % plan["id"], headers=release_key(plan))
        assert code == 200
        code, another = post(restarted, "/ina/plans", PLAN)
        assert code == 201 and another["id"] > plan["id"]   # ids and their ports are not reused
        for path, item in (("/multicast/trees/%d", tree), ("/selmcast/rounds/%d", second),
                           ("/ina/plans/%d", another)):
            code, _ = restarted.request("DELETE", path % item["id"], headers=release_key(item))
            assert code == 200, path
        assert listed(restarted) == NOTHING_LISTED and empty(restarted)
    finally:
        restarted.close()


def test_a_switch_that_kept_its_tables_reconnects_without_a_single_change(controller):
    post(controller, "/multicast/trees", TREE)
    post(controller, "/ina/plans", PLAN)
    post(controller, "/selmcast/rounds", {"job": "r", "workers": ["h1", "h3"], "update_mb": 0.1,
                                          "p": 1})
    held = controller.state()
    for switch in controller.view.switches:
        since = len(controller.network.sent)
        controller.connect(switch, keep_table=True)   # a restarted controller, tables intact
        assert changes_sent(controller, switch, since) == [], switch
    assert controller.state() == held
    assert all(s["synced"] for s in controller.request("GET", "/fabric/topology")[1]["switches"])


def test_a_reconnecting_switch_gets_only_the_difference_in_place(controller):
    _, tree = post(controller, "/multicast/trees", TREE)
    held = controller.state()
    table = controller.switches["leaf1"].table
    ofproto = controller.switches["leaf1"].ofproto
    datapath = controller.switches["leaf1"]
    flags, (band,) = table.meters[tree["id"]]
    table.meters[tree["id"]] = (flags, [type(band)(rate=band.rate * 2, burst_size=band.burst_size)])
    table.apply(of.flow_add(datapath, of.multicast_cookie(99), of.PRIORITY_MULTICAST,
                            datapath.ofproto_parser.OFPMatch(eth_type=of.ETH_TYPE_IPV4,
                                                             ipv4_dst="239.9.9.9"), []))
    spine = next(b for a, b in tree["edges"] if a == "leaf1" and b.startswith("spine"))
    controller.switches[spine].table.groups.clear()   # the tree's flow goes with its group
    controller.switches[spine].table.flows = [
        f for f in controller.switches[spine].table.flows if f[1] != of.multicast_cookie(tree["id"])]
    since = len(controller.network.sent)
    controller.connect("leaf1", keep_table=True)
    controller.connect(spine, keep_table=True)
    assert [(type(m).__name__, m.command) for m in changes_sent(controller, "leaf1", since)] == [
        ("OFPMeterMod", ofproto.OFPMC_MODIFY), ("OFPFlowMod", ofproto.OFPFC_DELETE_STRICT)]
    assert [(type(m).__name__, m.command) for m in changes_sent(controller, spine, since)] == [
        ("OFPGroupMod", ofproto.OFPGC_ADD), ("OFPFlowMod", ofproto.OFPFC_ADD)]
    assert controller.state() == held and delivered(controller, tree) == {"h2", "h3", "h4"}


def test_rules_sent_while_a_switch_is_read_are_not_taken_for_stale(controller):
    """OpenKilda #3398: a sync that read the switch before a reroute's rules reached it
    must not delete them (nor fail re-adding them)."""
    created = []

    def create_while_reading(datapath, message):
        if not created and type(message).__name__ == "OFPFlowStatsReply" \
                and datapath is controller.switches.get("leaf1"):
            created.append(hub.spawn(controller.request, "POST", "/multicast/trees", TREE))
            hub.sleep(0.05)   # the tree's messages reach the switch before the replies land
    controller.network.before_answer = create_while_reading
    controller.connect("leaf1", keep_table=True)
    code, tree = created[0].wait()
    controller.settle()
    assert code == 201
    topology = controller.request("GET", "/fabric/topology")[1]
    assert all(s["synced"] for s in topology["switches"])
    assert delivered(controller, tree) == {"h2", "h3", "h4"}
    assert controller.state()["leaf1"]["groups"] == [tree["id"], failover_group_id(tree["id"], 0)]
