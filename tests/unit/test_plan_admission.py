"""Only a plan's members reach its UDP ports: table 0 of every switch admits their
datagrams from their own ports with their own addresses, drops (and counts) the rest
to those destinations, and leaves everything else and traffic between switches alone."""

import pytest
from ryu.base import app_manager

from apps.ina_controller import EventCountDrops
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.plan_admission import admission, plan_destinations, plan_members
from syncfabric.openflow import builders as of
from tests.harness.fake_controller import connected, description
from tests.harness.fake_openflow import flow_stats_reply, walk
from tests.harness.in_process import TREE, delivered, empty, post, release_key

PLAN = {"job": "j", "workers": ["h1", "h2", "h4"], "ps": "h5", "gradient_mb": 1}


@pytest.fixture
def roomy():
    """2x2 with three hosts on each leaf: h3 and h6 are in no plan."""
    yield from connected(description(hosts_per_leaf=3))


def udp(view, source_ip, destination, port):
    return {"eth_type": of.ETH_TYPE_IPV4, "ip_proto": of.IP_PROTO_UDP, "ipv4_src": source_ip,
            "ipv4_dst": view.ip(destination), "udp_dst": port}


def first_switch_outputs(controller, sender, packet):
    """What the sender's switch does with the packet: its output ports ([]: dropped)."""
    switch, port = controller.view.attachment(sender)
    return controller.tables()[switch].lookup(dict(packet, in_port=port))


def drops_counted(controller):
    """The INA app's timer once: the drop counts asked and added to the metrics."""
    ina_app = app_manager.lookup_service_brick("InaController")
    ina_app.send_event(ina_app.name, EventCountDrops())
    controller.settle()
    families = controller.services.metrics.registry.collect()
    return {sample.labels["switch"]: sample.value for family in families
            for sample in family.samples if sample.name == "syncfabric_admission_drops_total"}


def test_members_reach_the_plans_ports_and_nobody_else_does(roomy):
    view = roomy.view
    _, plan = post(roomy, "/ina/plans", PLAN)
    port = plan["port"]
    assert walk(view, roomy.tables(), "h1", udp(view, view.ip("h1"), "h5", port))[-1] == "h5"
    # a host of the plan's own leaf and one of the PS's leaf, each with a member's address
    assert first_switch_outputs(roomy, "h3", udp(view, view.ip("h1"), "h5", port)) == []
    assert first_switch_outputs(roomy, "h6", udp(view, view.ip("h4"), "h5", port)) == []
    # a member with another member's address, and toward an aggregator's port
    assert first_switch_outputs(roomy, "h2", udp(view, view.ip("h1"), "h5", port)) == []
    for aggregator in view.aggregators:
        assert first_switch_outputs(roomy, "h3", udp(view, view.ip("h3"), aggregator, port)) == []
    # the rest passes: other ports of the PS, and any port of a host outside the plan
    assert walk(view, roomy.tables(), "h3", udp(view, view.ip("h3"), "h5", port + 1))[-1] == "h5"
    assert walk(view, roomy.tables(), "h3", udp(view, view.ip("h3"), "h6", port))[-1] == "h6"
    assert drops_counted(roomy) == {"leaf1": 2 + len(view.aggregators), "leaf2": 1,
                                    "spine1": 0, "spine2": 0}
    assert drops_counted(roomy)["leaf1"] == 2 + len(view.aggregators)   # counted once
    status, _ = roomy.request("DELETE", "/ina/plans/%d" % plan["id"], headers=release_key(plan))
    assert status == 200 and empty(roomy)
    assert walk(view, roomy.tables(), "h3", udp(view, view.ip("h1"), "h5", port))[-1] == "h5"


def test_a_switch_that_syncs_gets_the_plans_admission(roomy):
    view = roomy.view
    _, plan = post(roomy, "/ina/plans", PLAN)
    held = roomy.state()
    roomy.connect("leaf1")   # an empty table: reconciliation gives it the admission again
    assert roomy.state() == held
    assert first_switch_outputs(roomy, "h3", udp(view, view.ip("h1"), "h5", plan["port"])) == []


def test_admission_closes_every_destination_on_every_switch_and_admits_members_at_home():
    view = FabricView(description(hosts_per_leaf=3))
    ports = {"h5": 20016}
    aggregators = sorted(view.aggregators)
    members = plan_members(["h1", "h2", "h4"], ["h5"], aggregators)
    destinations = plan_destinations(view, ["h5"], aggregators, ports)
    assert destinations == {(view.ip(h), 20016) for h in ["h5", *aggregators]}
    shares = admission(view, members, destinations)
    assert set(shares) == set(view.switches)
    assert all(closed == destinations for _admits, closed in shares.values())
    leaf1_admits = shares["leaf1"][0]
    assert {(view.ip(h), view.attachment(h)[1]) for _p, _s, _d, _u in leaf1_admits
            for h in [view.host_by_ip[_s]]} == {(view.ip(h), view.attachment(h)[1])
                                                 for h in ["h1", "h2"]}
    assert all(view.attachment(view.host_by_ip[src])[1] == in_port
               for in_port, src, _dst, _udp in leaf1_admits)


def test_only_a_trees_source_port_may_send_to_its_group(controller):
    controller.connect_all()
    _, tree = post(controller, "/multicast/trees", TREE)
    assert delivered(controller, tree) == {"h2", "h3", "h4"}
    view = controller.view
    for sender in ["h2", "h3"]:   # the source's neighbour on its leaf, and a receiver elsewhere
        packet = {"eth_type": of.ETH_TYPE_IPV4, "ipv4_src": view.ip("h1"),
                  "ipv4_dst": tree["address"]}
        assert first_switch_outputs(controller, sender, packet) == []


def test_a_reading_takes_only_the_replies_to_its_own_requests():
    """The drop counts are flow stats too: a switch being read must not take them for
    part of what it holds."""
    from syncfabric.openflow.switch_sync import Readings
    from tests.harness.fake_openflow import FakeDatapath
    datapath = FakeDatapath(7, network=None)
    readings = Readings()
    flows, groups, meters = readings.start(datapath, sent_mark=0)
    foreign = datapath.set_xid(of.admission_drop_requests(datapath))
    assert not readings.part(7, "flows", ["not held"], False, foreign)
    assert not readings.part(7, "flows", [], False, flows.xid)
    assert not readings.part(7, "groups", [], False, groups.xid)
    assert readings.part(7, "meters", [], False, meters.xid)
    assert readings.end(7).entries["flows"] == []


def test_counting_drops_asks_each_switch_for_its_not_member_flows_only(roomy):
    """Table 0 holds a flow for each member's port besides each closed destination's:
    the count asks for the latter alone (their cookie's NOT_MEMBER_COOKIE_BIT), as
    parsing the members' flows cost the controller more than all else it did."""
    post(roomy, "/ina/plans", PLAN)
    leaf1 = roomy.switches["leaf1"].table.flows
    assert any(f.priority == of.PRIORITY_MEMBER for f in leaf1)   # h1's and h2's, left out
    for name in ["leaf1", "spine1"]:
        datapath = roomy.switches[name]
        table_0 = [f for f in datapath.table.flows if f.table_id == of.TABLE_ADMISSION
                   and f.cookie & of.APP_COOKIE_MASK == of.STEERING_COOKIE_BASE]
        asked = flow_stats_reply(datapath, of.admission_drop_requests(datapath)).body
        assert sorted(tuple(sorted(s.match.items())) for s in asked) == sorted(
            tuple(sorted(f.match.items())) for f in table_0
            if f.priority == of.PRIORITY_NOT_MEMBER)
        assert asked and all(s.priority == of.PRIORITY_NOT_MEMBER for s in asked)
