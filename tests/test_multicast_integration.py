"""Path-aware multicast for real: ryu-manager + OVS (userspace) + Mininet on a 2x2 spine-leaf."""

import re
import statistics
import subprocess
import time

import pytest

from apps.fabric_view import FabricView
from experiments.controller_client import ControllerHttpError
from experiments.traffic.model_transfer import run_transfer
from experiments.testbed import FabricTestbed, ofctl, wait_until
from mininet_topos.description import describe
from mininet_topos.spineleaf import SpineLeafTopo
from tests.conftest import require_root

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16656, 18083
SWITCHES = ("spine1", "spine2", "leaf1", "leaf2")


@pytest.fixture(scope="module")
def bed():
    require_root()
    topo = SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, bw=20)
    with FabricTestbed(topo, of_port=OF_PORT, rest_port=REST_PORT) as testbed:
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
    assert state[other_spine] == []
    for switch, children in (("leaf1", 2), (spine, 1), ("leaf2", 2)):
        groups = [line for line in state[switch] if line.startswith("group_id=%d," % tree["id"])]
        assert len(groups) == 1 and groups[0].count("bucket=") == children
        assert any("rate=5000" in line for line in state[switch])          # the meter band
        assert any("nw_dst=%s" % tree["address"] in line and "meter:%d" % tree["id"] in line
                   for line in state[switch])
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


@pytest.mark.parametrize("method, path, body, status, message", [
    ("POST", "/multicast/trees", b"{oops", 400, "malformed JSON"),
    ("POST", "/multicast/trees", [], 400, "must be a JSON object"),
    ("POST", "/multicast/trees", {"source": "h1"}, 400, "missing field(s): bandwidth_mbps, receivers"),
    ("POST", "/multicast/trees", {"source": "h1", "receivers": ["h3"], "bandwidth_mbps": 5, "colour": 1},
     400, "unknown field(s): colour"),
    ("POST", "/multicast/trees", {"source": "h1", "receivers": ["h3"], "bandwidth_mbps": -1}, 400,
     "positive number"),
    ("POST", "/multicast/trees", {"source": "h1", "receivers": ["h3"], "bandwidth_mbps": 5,
                                  "policy": "flood"}, 400, "policy must be one of"),
    ("POST", "/multicast/trees", {"source": "h1", "receivers": ["h3"], "bandwidth_mbps": 5, "ttl_s": 0},
     400, "ttl_s must be"),
    ("POST", "/multicast/trees", {"source": "h1", "receivers": ["h3", "h9"], "bandwidth_mbps": 5}, 404,
     "unknown host(s): h9"),
    ("POST", "/multicast/trees", {"source": "h1", "receivers": ["h3"], "bandwidth_mbps": 50}, 409,
     "largest feasible bandwidth is 20.000"),
    (b'{"source": "h1", "receivers": ["h3"], "bandwidth_mbps": 5, "ttl_s": Infinity}', None, None,
     400, "Infinity is not JSON"),
    (b'{"source": "h1", "receivers": ["h3"], "bandwidth_mbps": NaN}', None, None, 400,
     "NaN is not JSON"),
    ("GET", "/multicast/trees/999", None, 404, "no tree with id"),
    ("DELETE", "/multicast/trees/999", None, 404, "no tree with id"),
    ("DELETE", "/multicast/trees/abc", None, 404, "no tree with id"),
])
def test_bad_requests_get_their_status_and_change_nothing(bed, method, path, body, status, message):
    if isinstance(method, bytes):   # a raw POST body
        method, path, body = "POST", "/multicast/trees", method
    raw = body if isinstance(body, bytes) else None
    with pytest.raises(ControllerHttpError) as error:
        bed.client.request(method, path, None if raw else body, raw_body=raw)
    assert error.value.status == status
    assert message in error.value.body["error"]
    if status == 409:
        assert error.value.body["max_feasible_mbps"] == pytest.approx(20.0)
    assert bed.client.get("/multicast/trees") == {"trees": []}
    assert multicast_state(bed) == NOTHING


def test_reservations_add_up_and_the_conflict_names_what_is_left(bed):
    first = post_tree(bed, receivers=["h3"], bandwidth_mbps=12)
    try:
        with pytest.raises(ControllerHttpError) as error:
            post_tree(bed, receivers=["h4"], bandwidth_mbps=12)
        assert error.value.status == 409
        assert error.value.body["max_feasible_mbps"] == pytest.approx(8.0)   # h1's own link
        second = post_tree(bed, receivers=["h4"], bandwidth_mbps=8)
        bed.client.request("DELETE", "/multicast/trees/%d" % second["id"])
    finally:
        bed.client.request("DELETE", "/multicast/trees/%d" % first["id"])
    assert multicast_state(bed) == NOTHING


def test_a_switch_rejecting_the_tree_rolls_everything_back(bed):
    probe = post_tree(bed)
    bed.client.request("DELETE", "/multicast/trees/%d" % probe["id"])
    next_id = probe["id"] + 1
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-group", "leaf2",
                    "group_id=%d,type=all,bucket=output:3" % next_id], check=True)
    with pytest.raises(ControllerHttpError) as error:
        post_tree(bed, receivers=["h2", "h3"])
    assert error.value.status == 500 and "nothing was installed" in error.value.body["error"]
    assert bed.client.get("/multicast/trees") == {"trees": []}
    assert multicast_state(bed) == NOTHING
    again = post_tree(bed, receivers=["h2", "h3"], bandwidth_mbps=20)   # all bandwidth came back
    bed.client.request("DELETE", "/multicast/trees/%d" % again["id"])


def test_lease_expiry_releases_the_tree(bed):
    tree = post_tree(bed, ttl_s=1)
    assert 0 < tree["reservation"]["expires_in_s"] <= 1
    wait_until(lambda: not bed.client.get("/multicast/trees")["trees"], 5, "the lease to expire")
    assert multicast_state(bed) == NOTHING
    assert "tree %d: lease expired" % tree["id"] in bed.controller_log()


def test_loading_a_new_fabric_releases_every_tree(bed):
    post_tree(bed, receivers=["h2", "h3", "h4"])
    bed.client.put("/fabric/topology", describe(bed.topo))
    wait_until(lambda: not bed.client.get("/multicast/trees")["trees"] and all(
        s["synced"] for s in bed.client.get("/fabric/topology")["switches"]),
        10, "trees to be released and flows reinstalled after the fabric changed")
    assert multicast_state(bed) == NOTHING
    tree = post_tree(bed, bandwidth_mbps=20)          # the new book starts empty
    bed.client.request("DELETE", "/multicast/trees/%d" % tree["id"])
    assert "fabric changed: releasing tree" in bed.controller_log()


def statuses(calls):
    """Run calls (each returning an HTTP status) at the same moment; their statuses, sorted."""
    from concurrent.futures import ThreadPoolExecutor

    def status(call):
        try:
            call()
            return 200
        except ControllerHttpError as error:
            return error.status
    with ThreadPoolExecutor(len(calls)) as pool:
        return sorted(pool.map(status, calls))


def test_of_concurrent_deletes_of_one_tree_exactly_one_wins_and_the_rest_get_404(bed):
    for _ in range(3):
        tree = post_tree(bed, receivers=["h2", "h3", "h4"])
        path = "/multicast/trees/%d" % tree["id"]
        assert statuses([lambda: bed.client.request("DELETE", path)] * 4) == [200, 404, 404, 404]
    assert bed.client.get("/multicast/trees") == {"trees": []}
    assert multicast_state(bed) == NOTHING
    assert "Traceback" not in bed.controller_log()


def test_deletes_racing_the_lease_never_fail_and_leave_nothing(bed):
    trees = [post_tree(bed, receivers=["h2", "h3", "h4"], bandwidth_mbps=1, ttl_s=1.0)
             for _ in range(4)]
    time.sleep(max(0.0, 1.0 - 0.05 * len(trees)))   # DELETEs land while the lease runs out
    answers = statuses([lambda t=t: bed.client.request("DELETE", "/multicast/trees/%d" % t["id"])
                        for t in trees])
    assert set(answers) <= {200, 404}
    wait_until(lambda: bed.client.get("/multicast/trees") == {"trees": []}, 5, "leases")
    assert multicast_state(bed) == NOTHING
    assert "Traceback" not in bed.controller_log()


def test_a_delete_during_installation_leaves_nothing_and_the_post_says_so(bed):
    """ovs-vswitchd is paused (SIGSTOP) so that the installation waits for its barrier:
    the DELETE lands inside that window every time."""
    import os
    import signal
    from concurrent.futures import ThreadPoolExecutor
    pid = int(subprocess.run(["pidof", "ovs-vswitchd"], capture_output=True, text=True,
                             check=True).stdout.split()[0])
    with ThreadPoolExecutor(2) as pool:
        os.kill(pid, signal.SIGSTOP)
        try:
            creating = pool.submit(post_tree, bed, receivers=["h2", "h3", "h4"])
            wait_until(lambda: bed.client.get("/multicast/trees")["trees"], 3, "the tree booked")
            (listed,) = bed.client.get("/multicast/trees")["trees"]
            deleting = pool.submit(bed.client.request, "DELETE", "/multicast/trees/%d" % listed["id"])
            time.sleep(0.3)
            assert not creating.done() and not deleting.done()   # both wait for the switches
        finally:
            os.kill(pid, signal.SIGCONT)
        assert deleting.result()["released"]["id"] == listed["id"]
        with pytest.raises(ControllerHttpError) as error:
            creating.result()
    assert error.value.status == 409
    assert "released while being installed" in error.value.body["error"]
    assert bed.client.get("/multicast/trees") == {"trees": []}
    assert multicast_state(bed) == NOTHING
    assert "Traceback" not in bed.controller_log()


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


def test_a_tree_that_fits_nowhere_after_a_failure_is_released(bed):
    tree = post_tree(bed, receivers=["h3"])
    ports = [bed.view.out_port("leaf1", spine) for spine in ("spine1", "spine2")]
    for port in ports:
        set_port("leaf1", port, "down")
    try:
        wait_until(lambda: bed.client.get("/multicast/trees") == {"trees": []}, 5,
                   "the tree to be released")
        assert multicast_state(bed) == NOTHING
        assert "no other tree fits" in bed.controller_log()
    finally:
        for port in ports:
            set_port("leaf1", port, "up")
    wait_until(lambda: bed.host("h1").cmd("ping -c 1 -W 1 %s" % bed.host("h3").IP()).count(
        " 0% packet loss"), 10, "unicast to be restored")
    del tree
