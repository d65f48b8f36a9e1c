"""Path-aware multicast for real: ryu-manager + OVS (userspace) + Mininet on a 2x2 spine-leaf."""

import re
import statistics
import subprocess
import time

import pytest

from experiments.host_measurements import (UdpStream, concurrent_goodputs_mbps,
                                           multicast_goodput_mbps)
from experiments.ovs import ofctl
from experiments.controller_process import wait_until
from experiments.testbed import FabricTestbed
from experiments.traffic.model_transfer import run_transfer
from mininet_topos.data_plane import DataPlane
from mininet_topos.description import describe
from mininet_topos.spineleaf import SpineLeafTopo
from mininet_topos.platform_net import switch_class_counters, switch_class_rates
from mininet_topos.traffic_classes import FLOOR_HEADROOM, MIN_RATE_KBIT
from apps.ina_controller import DROPS_INTERVAL_S as COUNT_INTERVAL_S
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.traffic_classes import BORROWED_DSCP, tos_byte
from tests.harness.testbeds import require_root, scrape

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16656, 18083
LINK_MBPS = 20
BORROWED_TOS = tos_byte(BORROWED_DSCP)
SWITCHES = ("spine1", "spine2", "leaf1", "leaf2")


@pytest.fixture(scope="module")
def bed():
    require_root()
    topo = SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, bw=LINK_MBPS)
    with FabricTestbed(topo, of_port=OF_PORT, rest_port=REST_PORT,
                       data_plane=DataPlane(traffic_classes=True)) as testbed:
        testbed.view = FabricView(describe(topo))
        yield testbed


def multicast_state(bed):
    """Every group, meter and multicast flow on every switch."""
    return dict(NOTHING, **bed.leftovers())


NOTHING = {switch: [] for switch in SWITCHES}


def post_tree(bed, **fields):
    body = dict({"source": "h1", "receivers": ["h3"], "bandwidth_mbps": 5}, **fields)
    return bed.client.request("POST", "/multicast/trees", body)


def test_reserved_tree_delivers_the_model_to_every_receiver(bed):
    (result,) = run_transfer(bed, "h1", ["h2", "h3", "h4"], "path-aware", model_mb=1, rate_mbps=15)
    assert result["verified"] is True
    assert result["tree_edges"] == 6
    assert bed.client.get("/multicast/trees") == {"trees": []}
    assert multicast_state(bed) == NOTHING


def test_tree_is_installed_hop_by_hop_and_release_removes_it(bed):
    tree = post_tree(bed, receivers=["h2", "h3", "h4"])
    assert (tree["policy"], tree["reservation"]["links"]) == ("path-aware", 6)
    spine = next(child for parent, child in tree["edges"] if parent == "leaf1")
    state = multicast_state(bed)
    other_spine = ({"spine1", "spine2"} - {spine}).pop()
    assert tree["backup_uplinks"] == [["leaf1", spine, other_spine]]
    # the backup spine holds the tree's share toward leaf2; leaf2 takes it from either
    for switch, children, in_ports in (("leaf1", 2, 1), (spine, 1, 1), (other_spine, 1, 1),
                                       ("leaf2", 2, 2)):
        groups = [line for line in state[switch] if line.startswith("group_id=%d," % tree["id"])]
        assert len(groups) == 1 and groups[0].count("bucket=") == children
        flows = [line for line in state[switch] if "nw_dst=%s" % tree["address"] in line]
        policed = switch == "leaf1"   # h1's switch: the tree's only meter
        borrowed = [line for line in flows if "nw_tos=4" in line]   # the meter's twin
        assert (len(flows), len(borrowed)) == (in_ports + policed, int(policed))
        assert any("rate=5000" in line for line in state[switch]) == policed   # the meter band
        guaranteed = [line for line in flows if line not in borrowed]
        assert ("meter:%d" % tree["id"] in guaranteed[0]) == policed
        assert not any("meter:" in line for line in borrowed)
    # leaf1 reaches the spines through a FAST_FAILOVER group: the uplink while it is live
    (failover,) = [line for line in state["leaf1"] if "type=ff" in line]
    assert re.search(r"bucket=watch_port:(\d+),actions=output:\1,bucket=watch_port:(\d+),"
                     r"actions=output:\2", failover)
    assert bed.client.get("/multicast/trees/%d" % tree["id"])["address"] == tree["address"]
    released = bed.client.request("DELETE", "/multicast/trees/%d" % tree["id"])
    assert released["released"]["id"] == tree["id"]
    assert multicast_state(bed) == NOTHING
    assert bed.client.get("/multicast/trees") == {"trees": []}


def test_meter_enforces_the_reserved_rate(bed):
    tree = post_tree(bed, bandwidth_mbps=5)
    server = bed.host("h3").popen(["iperf", "-s", "-u", "-B", tree["address"], "-i", "1"],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(0.5)
        bed.host("h1").cmd("iperf -c %s -u -b 10M -t 4 -T 4" % tree["address"])
        time.sleep(1.5)
    finally:
        server.terminate()
        output = server.communicate()[0]
        bed.client.request("DELETE", "/multicast/trees/%d" % tree["id"])
    # one-second intervals of the receiver: the sender offers 10 Mbit/s, the meter passes 5
    seconds = [float(rate) for start, end, rate in
               re.findall(r"(\d+)\.0+-\s*(\d+)\.0+ sec .*? ([\d.]+) Mbits/sec", output)
               if int(end) - int(start) == 1]
    assert len(seconds) >= 3, output
    assert statistics.median(seconds) == pytest.approx(5.0, rel=0.15), output


def set_port(switch, port, state):
    ofctl("mod-port", switch, str(port), state)


def test_a_failed_link_moves_the_tree_make_before_break_and_unicast_follows(bed):
    tree = post_tree(bed, receivers=["h2", "h3", "h4"])
    spine = next(child for parent, child in tree["edges"] if parent == "leaf1")
    other = ({"spine1", "spine2"} - {spine}).pop()
    port = bed.view.out_port("leaf1", spine)
    set_port("leaf1", port, "down")
    try:
        def moved():
            now = bed.client.get("/multicast/trees/%d" % tree["id"])
            return ["leaf1", spine] not in now["edges"] and now
        now = wait_until(moved, 5, "the tree to leave the failed link") or moved()
        assert (now["id"], now["address"], now["bandwidth_mbps"]) == (
            tree["id"], tree["address"], tree["bandwidth_mbps"])
        assert ["leaf1", other] in now["edges"]
        # the old path is removed a drain after the move (installer.DRAIN_S), not at once
        wait_until(lambda: multicast_state(bed)[spine] == [], 3,
                   "the old spine's share to go after the drain")
        state = multicast_state(bed)
        assert state[spine] == [] and state[other]   # the old spine holds nothing any more
        ping = bed.host("h1").cmd("ping -c 1 -W 2 %s" % bed.host("h3").IP())
        assert " 0% packet loss" in ping                 # unicast goes around too
        (result,) = run_transfer(bed, "h1", ["h2", "h3", "h4"], "path-aware", model_mb=0.5,
                                 rate_mbps=15)
        assert result["verified"] is True
    finally:
        set_port("leaf1", port, "up")
        bed.client.request("DELETE", "/multicast/trees/%d" % tree["id"])
    wait_until(lambda: "fabric links down: none" in bed.controller_log(), 5, "the link back")
    assert multicast_state(bed) == NOTHING
    assert "tree %d rerouted around failed link(s)" % tree["id"] in bed.controller_log()




def test_a_greedy_sender_gets_its_reservation_and_one_within_it_loses_nothing(bed):
    # iperf 2, not one of our programs: it sends at whatever rate it is told
    tree = post_tree(bed, receivers=["h2", "h3", "h4"], bandwidth_mbps=5)
    receivers = [bed.host(name) for name in tree["receivers"]]
    try:
        within = multicast_goodput_mbps(bed.host("h1"), receivers, tree["address"], send_mbps=4)
        greedy = multicast_goodput_mbps(bed.host("h1"), receivers, tree["address"], send_mbps=10)
    finally:
        bed.client.request("DELETE", "/multicast/trees/%d" % tree["id"])
    assert all(mbps >= 0.98 * 4 for mbps in within.values()), within
    assert all(0.9 * 5 <= mbps <= 1.05 * 5 for mbps in greedy.values()), greedy
    assert multicast_state(bed) == NOTHING


def test_borrowed_datagrams_pass_the_meter_and_take_the_idle_link(bed):
    """A tree metered at 5 Mbit/s: what its source sends unmarked is held to 5, what it
    marks borrowed (DSCP 1) passes the meter's twin and takes the idle 20 Mbit/s link."""
    tree = post_tree(bed, receivers=["h3"], bandwidth_mbps=5)
    source, receiver = bed.host("h1"), bed.host("h3")
    before = class_counts(bed)
    try:
        guaranteed, = concurrent_goodputs_mbps(
            [UdpStream(source, (receiver,), tree["address"], 5001, 25)], seconds=3)
        borrowed, = concurrent_goodputs_mbps(
            [UdpStream(source, (receiver,), tree["address"], 5001, 25, BORROWED_TOS)], seconds=3)
        time.sleep(COUNT_INTERVAL_S * 1.5)   # the controller asks the switches for counts
        after = class_counts(bed)
    finally:
        bed.client.request("DELETE", "/multicast/trees/%d" % tree["id"])
    assert 0.9 * 5 <= guaranteed["h3"] <= 1.25 * 5, guaranteed   # the meter's bucket passes more
    assert borrowed["h3"] >= 0.9 * LINK_MBPS, borrowed
    # /metrics: what entered the meter (25 Mbit/s for 3 s), what it dropped, what the twin took
    offered = 25e6 / 8 * 3
    counted = {name: after[name] - before[name] for name in after}
    assert counted["guaranteed"] >= 0.8 * offered, counted
    assert counted["policed"] >= 0.8 * (offered - 1.25 * 5e6 / 8 * 3), counted
    # the twin counts what it passed on: at least what reached h3 (7.37-7.48 MB entered
    # it in runs here, about what the 20 Mbit/s link carries in 3 s: 0.8 of what was
    # offered, 7.50 MB, is no bound to test)
    assert counted["borrowed"] >= 0.95 * borrowed["h3"] * 1e6 / 8 * 3, (counted, borrowed)
    assert multicast_state(bed) == NOTHING


def class_counts(bed):
    """{"guaranteed", "borrowed": bytes in each class, "policed": bytes floors' meters
    dropped}, summed over the switches, from GET /metrics."""
    counts = {"guaranteed": 0.0, "borrowed": 0.0, "policed": 0.0}
    for (name, labels), value in scrape(bed).items():
        if name == "syncfabric_class_bytes_total":
            counts[dict(labels)["class"]] += value
        elif name == "syncfabric_floor_policed_bytes_total":
            counts["policed"] += value
    return counts


def test_guaranteed_traffic_keeps_its_floor_under_a_borrowed_flood(bed):
    """h1's tree sends its 8 Mbit/s floor unmarked while h2 floods borrowed datagrams on
    a tree to the same receiver: the floor arrives whole, no switch queue drops a
    guaranteed datagram (the classes' counters), and the flood gets what is left."""
    floor = post_tree(bed, source="h1", receivers=["h3"], bandwidth_mbps=8)
    flood = post_tree(bed, source="h2", receivers=["h3"], bandwidth_mbps=2)
    receiver = bed.host("h3")
    # the port toward h3 carries both floors: its guaranteed class is sized to them
    to_receiver = "leaf2-eth%d" % bed.view.out_port("leaf2", "h3")
    sized = {"guaranteed": round(10 * FLOOR_HEADROOM * 1000),
             "borrowed": round((LINK_MBPS - 10 * FLOOR_HEADROOM) * 1000)}
    try:
        wait_until(lambda: switch_class_rates(bed.net)[to_receiver] == sized, 5,
                   "the classes toward h3 sized to the two trees' floors")
        before = switch_class_counters(bed.net)
        kept, flooded = concurrent_goodputs_mbps(
            [UdpStream(bed.host("h1"), (receiver,), floor["address"], 5001, 8),
             UdpStream(bed.host("h2"), (receiver,), flood["address"], 5002, 30, BORROWED_TOS)],
            seconds=4)
    finally:
        for tree in (floor, flood):
            bed.client.request("DELETE", "/multicast/trees/%d" % tree["id"])
    after = switch_class_counters(bed.net)
    assert kept["h3"] >= 0.98 * 8, kept
    assert flooded["h3"] >= 0.8 * (LINK_MBPS - 8), flooded
    guaranteed_drops = sum(after[port]["guaranteed"]["dropped"]
                           - before[port]["guaranteed"]["dropped"] for port in after)
    borrowed_drops = sum(after[port]["borrowed"]["dropped"] - before[port]["borrowed"]["dropped"]
                         for port in after)
    assert guaranteed_drops == 0 and borrowed_drops > 0, (guaranteed_drops, borrowed_drops)
    assert multicast_state(bed) == NOTHING
    # the floors released, the classes go back to nothing booked
    released = {"guaranteed": MIN_RATE_KBIT, "borrowed": LINK_MBPS * 1000 - MIN_RATE_KBIT}
    wait_until(lambda: switch_class_rates(bed.net)[to_receiver] == released, 5,
               "the classes toward h3 back to no floors")
