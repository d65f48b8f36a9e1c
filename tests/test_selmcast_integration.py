"""SELMCAST for real: ryu-manager (selmcast + multicast + fabric apps) + OVS + Mininet, 2x2 spine-leaf."""

import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from experiments.controller_client import ControllerHttpError
from experiments.traffic.peer_sync import run_peer_sync
from experiments.traffic.transport import model_bytes, wire_bytes
from mininet_topos.spineleaf import SpineLeafTopo
from tests.conftest import running_testbed

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16658, 18085
SWITCHES = ("spine1", "spine2", "leaf1", "leaf2")
NOTHING = {switch: [] for switch in SWITCHES}
WORKERS = ["h1", "h2", "h3", "h4"]
HOST_RATES = [20, 10, 15, 20]


@pytest.fixture(scope="module")
def bed():
    yield from running_testbed(SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, bw=20,
                                             host_bw=HOST_RATES), OF_PORT, REST_PORT)


def multicast_state(bed):
    return dict(NOTHING, **bed.leftovers())


def post_round(bed, **fields):
    body = dict({"job": "test", "workers": WORKERS, "update_mb": 0.2, "p": 1}, **fields)
    return bed.client.request("POST", "/selmcast/rounds", body)


def test_a_round_delivers_every_update_to_exactly_the_selected_receivers(bed):
    request = {"job": "delivery", "p": 2, "cost_model": "L3"}
    (result,) = run_peer_sync(bed, WORKERS, 0.3, [request])
    plan = result["plan"]
    assert result["verified"] is True
    assert all(len(receivers) >= 2 and sender not in receivers
               for sender, receivers in plan["assignment"].items())
    # one tree per sender, whose receivers are exactly its selected receivers
    assert {tree["source"]: sorted(tree["receivers"]) for tree in plan["trees"]} == {
        sender: sorted(receivers) for sender, receivers in plan["assignment"].items()}
    assert result["deliveries"] == sum(map(len, plan["assignment"].values()))
    # reserved at v_i / t on host links whose capacities differ; v_i is the update's wire size
    update_mbit = wire_bytes(len(model_bytes(0.3))) * 8 / 1e6
    assert all(tree["bandwidth_mbps"] == pytest.approx(update_mbit / plan["t_s"])
               for tree in plan["trees"])
    assert plan["t_s"] >= plan["lower_bound_s"] * (1 - 1e-9)
    assert bed.client.get("/selmcast/rounds") == {"rounds": []}
    assert bed.client.get("/multicast/trees") == {"trees": []}
    assert multicast_state(bed) == NOTHING


def test_l7_reserves_one_tree_per_copy(bed):
    plan = post_round(bed, job="fanout", p=2, cost_model="L7")
    try:
        copies = sum(map(len, plan["assignment"].values()))
        assert len(plan["trees"]) == copies and all(len(t["receivers"]) == 1 for t in plan["trees"])
    finally:
        bed.client.request("DELETE", "/selmcast/rounds/%d" % plan["id"])
    assert multicast_state(bed) == NOTHING


def test_release_leaves_nothing_and_concurrent_deletes_release_once(bed):
    plan = post_round(bed, job="release")
    assert bed.client.get("/selmcast/rounds/%d" % plan["id"])["trees"] == plan["trees"]
    state = multicast_state(bed)
    assert sum(len(lines) for lines in state.values()) > 0
    assert len(bed.client.get("/multicast/trees")["trees"]) == len(plan["trees"])

    def delete(_):
        try:
            return bed.client.request("DELETE", "/selmcast/rounds/%d" % plan["id"])["released"]["id"]
        except ControllerHttpError as error:
            return error.status
    with ThreadPoolExecutor(3) as pool:
        answers = sorted(pool.map(delete, range(3)), key=str)
    assert answers.count(plan["id"]) == 1 and answers.count(404) == 2
    assert multicast_state(bed) == NOTHING
    assert bed.client.get("/multicast/trees") == {"trees": []}


def test_the_k_rule_history_is_kept_per_job(bed):
    rounds = []
    for _ in range(3):
        plan = post_round(bed, job="history", k=1)
        rounds.append(plan)
        bed.client.request("DELETE", "/selmcast/rounds/%d" % plan["id"])
    assert [r["round"] for r in rounds] == [1, 2, 3]
    assert rounds[0]["forced_pairs"] == 0
    # with k = 1 every pair that did not sync in the previous round is forced in the next
    synced = {frozenset((s, r)) for s, rs in rounds[0]["assignment"].items() for r in rs}
    assert rounds[1]["forced_pairs"] == 6 - len(synced)
    assert post_round(bed, job="other-job")["round"] == 1
    for plan in bed.client.get("/selmcast/rounds")["rounds"]:
        bed.client.request("DELETE", "/selmcast/rounds/%d" % plan["id"])
    with pytest.raises(ControllerHttpError) as error:
        post_round(bed, job="history", k=2)
    assert error.value.status == 400 and "uses k = 1" in error.value.body["error"]


def test_a_round_whose_last_tree_is_refused_installs_nothing(bed):
    probe = bed.client.request("POST", "/multicast/trees",
                               {"source": "h1", "receivers": ["h3"], "bandwidth_mbps": 1})
    bed.client.request("DELETE", "/multicast/trees/%d" % probe["id"])
    last_id = probe["id"] + len(WORKERS)           # the 4th tree: h4's, which starts at leaf2
    subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-group", "leaf2",
                    "group_id=%d,type=all,bucket=output:3" % last_id], check=True)
    try:
        with pytest.raises(ControllerHttpError) as error:
            post_round(bed, job="refused")
        assert error.value.status == 500 and "nothing was installed" in error.value.body["error"]
    finally:
        subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "del-groups", "leaf2",
                        "group_id=%d" % last_id], check=True)
    assert bed.client.get("/selmcast/rounds") == {"rounds": []}
    assert bed.client.get("/multicast/trees") == {"trees": []}
    assert multicast_state(bed) == NOTHING
    again = post_round(bed, job="refused")           # the failed round left no history behind
    assert again["round"] == 1
    bed.client.request("DELETE", "/selmcast/rounds/%d" % again["id"])


@pytest.mark.parametrize("body, status, message", [
    (b"{oops", 400, "malformed JSON"),
    ({"job": "x", "workers": WORKERS, "update_mb": 1}, 400, "missing field(s): p"),
    ({"job": "x", "workers": WORKERS, "update_mb": 1, "p": 1, "colour": 2}, 400, "unknown field(s): colour"),
    ({"job": "x", "workers": ["h1"], "update_mb": 1, "p": 1}, 400, "at least 2 distinct"),
    ({"job": "x", "workers": WORKERS, "update_mb": -1, "p": 1}, 400, "update_mb must be"),
    ({"job": "x", "workers": WORKERS, "update_mb": 1, "p": 4}, 400, "p must be between 0 and n - 1"),
    ({"job": "x", "workers": WORKERS, "update_mb": 1, "p": [1, 1]}, 400, "p must be one valid number"),
    ({"job": "x", "workers": WORKERS, "update_mb": 1, "p": 1, "cost_model": "L4"}, 400, "cost_model"),
    ({"job": "x", "workers": WORKERS, "update_mb": 1, "p": 1, "policy": "all"}, 400, "policy must"),
    ({"job": "x", "workers": ["h1", "h9"], "update_mb": 1, "p": 1}, 404, "unknown host(s): h9"),
])
def test_bad_round_requests_get_their_status_and_change_nothing(bed, body, status, message):
    raw = body if isinstance(body, bytes) else None
    with pytest.raises(ControllerHttpError) as error:
        bed.client.request("POST", "/selmcast/rounds", None if raw else body, raw_body=raw)
    assert error.value.status == status
    assert message in error.value.body["error"]
    assert bed.client.get("/selmcast/rounds") == {"rounds": []}
    assert multicast_state(bed) == NOTHING


def test_a_worker_without_bandwidth_gets_409_and_unknown_rounds_404(bed):
    hog = bed.client.request("POST", "/multicast/trees",
                             {"source": "h2", "receivers": ["h1"], "bandwidth_mbps": 10})
    try:
        with pytest.raises(ControllerHttpError) as error:
            post_round(bed, job="starved")
        assert error.value.status == 409 and "no bandwidth left on the link of h2" in \
            error.value.body["error"]
    finally:
        bed.client.request("DELETE", "/multicast/trees/%d" % hog["id"])
    for method in ("GET", "DELETE"):
        with pytest.raises(ControllerHttpError) as error:
            bed.client.request(method, "/selmcast/rounds/77")
        assert error.value.status == 404 and "no round with id" in error.value.body["error"]
    assert multicast_state(bed) == NOTHING
