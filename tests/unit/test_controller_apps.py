"""The controller's apps in-process on fake switches (tests/fake_controller.py): what they
answer, what the switches end up holding, and what is left after refusals, races,
reroutes and reconnections. No root, no Open vSwitch."""

import time

import pytest
from ryu.lib import hub

from syncfabric.openflow import builders as of
from syncfabric.openflow.installer import DRAIN_S
from tests.harness.fake_controller import InProcessController, description
from tests.harness.fake_openflow import multicast_walk, walk

TREE = {"source": "h1", "receivers": ["h2", "h3", "h4"], "bandwidth_mbps": 5}


@pytest.fixture
def controller():
    controller = InProcessController(description())
    yield controller
    controller.close()


def empty(controller):
    """No tree or plan state on any switch, nothing booked."""
    return (all(s == {"flows": [], "groups": [], "meters": []} for s in controller.state().values())
            and dict(controller.services.fabric.ledger.reserved_mbps) == {})


def delivered(controller, tree):
    packet = {"eth_type": of.ETH_TYPE_IPV4, "ipv4_src": controller.view.ip(tree["source"]),
              "ipv4_dst": tree["address"]}
    return multicast_walk(controller.view, controller.tables(), tree["source"], packet)


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


def post(controller, path, body, **headers):
    return controller.request("POST", path, body, headers=headers)


def release_key(answer):
    return {"X-Release-Key": answer["release_key"]}


def listed(controller):
    """Every tree, round and plan the REST API reports."""
    return {"trees": controller.request("GET", "/multicast/trees")[1]["trees"],
            "rounds": controller.request("GET", "/selmcast/rounds")[1]["rounds"],
            "plans": controller.request("GET", "/ina/plans")[1]["plans"]}


NOTHING_LISTED = {"trees": [], "rounds": [], "plans": []}


@pytest.mark.parametrize("path, body, status, message", [
    ("/multicast/trees", b"{oops", 400, "malformed JSON"),
    ("/multicast/trees", [], 400, "must be a JSON object"),
    ("/multicast/trees", {"source": "h1"}, 400, "missing field(s): bandwidth_mbps, receivers"),
    ("/multicast/trees", dict(TREE, colour=1), 400, "unknown field(s): colour"),
    ("/multicast/trees", dict(TREE, bandwidth_mbps=-1), 400, "positive number"),
    ("/multicast/trees", dict(TREE, policy="flood"), 400, "policy must be one of"),
    ("/multicast/trees", dict(TREE, ttl_s=0), 400, "ttl_s must be"),
    ("/multicast/trees", b'{"source": "h1", "receivers": ["h3"], "bandwidth_mbps": NaN}', 400,
     "NaN is not JSON"),
    ("/multicast/trees", dict(TREE, receivers=["h3", "h9"]), 404, "unknown host(s): h9"),
    ("/multicast/trees", dict(TREE, bandwidth_mbps=50), 409, "largest feasible bandwidth is 20.000"),
    ("/selmcast/rounds", {"job": "x", "workers": ["h1"], "update_mb": 1, "p": 1}, 400,
     "at least 2 distinct"),
    ("/selmcast/rounds", {"job": "x", "workers": ["h1", "h2"], "update_mb": 1, "p": 4}, 400,
     "p must be between 0 and n - 1"),
    ("/selmcast/rounds", {"job": "x", "workers": ["h1", "h9"], "update_mb": 1, "p": 1}, 404,
     "unknown host(s): h9"),
    ("/ina/plans", {"job": "j", "workers": [], "ps": "h4", "gradient_mb": 1}, 400, "workers must be"),
    ("/ina/plans", {"job": "j", "workers": ["h1"], "ps": "h1", "gradient_mb": 1}, 400, "ps must be"),
    ("/ina/plans", {"job": "j", "workers": ["h1", "agg-spine1"], "ps": "h4", "gradient_mb": 1},
     400, "cannot be workers"),
    ("/ina/plans", {"job": "j", "workers": ["h1"], "ps": "h4", "gradient_mb": 1,
                    "aggregators": ["h2"]}, 400, "not aggregator"),
    ("/ina/plans", {"job": "j", "workers": ["h1", "h2"], "ps": ["h3", "h4"], "gradient_mb": 1,
                    "policy": "grid"}, 400, "plans for one PS"),
    ("/ina/plans", {"job": "j", "workers": ["h1", "h99"], "ps": "h4", "gradient_mb": 1}, 404,
     "unknown host(s): h99"),
])
def test_bad_requests_get_their_status_and_change_nothing(controller, path, body, status, message):
    code, answer = post(controller, path, body)
    assert (code, message in answer["error"]) == (status, True), answer
    if status == 409:
        assert answer["max_feasible_mbps"] == pytest.approx(20.0)
    assert listed(controller) == NOTHING_LISTED
    assert empty(controller)


@pytest.mark.parametrize("path", ["/multicast/trees/999", "/multicast/trees/abc",
                                  "/selmcast/rounds/77", "/ina/plans/77"])
def test_unknown_ids_get_404_on_get_and_delete(controller, path):
    for method in ("GET", "DELETE"):
        code, answer = controller.request(method, path)
        assert code == 404 and "no " in answer["error"]


def test_without_a_fabric_requests_get_503_and_change_nothing():
    controller = InProcessController()
    try:
        for path, body in [("/multicast/trees", TREE),
                           ("/ina/plans", {"job": "j", "workers": ["h1"], "ps": "h4",
                                           "gradient_mb": 1}),
                           ("/selmcast/rounds", {"job": "x", "workers": ["h1", "h2"],
                                                 "update_mb": 1, "p": 1})]:
            code, answer = post(controller, path, body)
            assert code == 503 and "PUT /fabric/topology" in answer["error"], answer
        assert listed(controller) == NOTHING_LISTED
    finally:
        controller.close()


def test_hosts_behind_a_disconnected_switch_get_409_and_nothing_is_booked(controller):
    controller.disconnect("leaf2")
    code, answer = post(controller, "/multicast/trees", TREE)
    assert code == 409 and "no tree" in answer["error"], answer
    code, answer = post(controller, "/ina/plans", {"job": "j", "workers": ["h1", "h2"],
                                                   "ps": "h3", "gradient_mb": 1})
    assert code in (409, 503), answer
    assert listed(controller) == NOTHING_LISTED
    assert dict(controller.services.fabric.ledger.reserved_mbps) == {}


def test_state_changes_need_the_token_and_release_needs_the_owner_key(controller, monkeypatch):
    monkeypatch.setenv("SYNCFABRIC_REST_TOKEN", "sesame")
    for method, path, body in [("POST", "/multicast/trees", TREE), ("PUT", "/fabric/topology", {}),
                               ("DELETE", "/multicast/trees/1", None),
                               ("POST", "/ina/plans", {}), ("POST", "/selmcast/rounds", {})]:
        code, answer = controller.request(method, path, body,
                                          headers={"Authorization": "Bearer wrong"})
        assert code == 401 and "Authorization: Bearer" in answer["error"]
    assert controller.request("GET", "/multicast/trees")[0] == 200   # GETs stay open
    token = {"Authorization": "Bearer sesame"}
    code, tree = post(controller, "/multicast/trees", TREE, **token)
    assert code == 201
    path = "/multicast/trees/%d" % tree["id"]
    for headers in ({}, dict(token, **{"X-Release-Key": "not-mine"})):
        code, answer = controller.request("DELETE", path, headers=headers)
        assert code in (401, 403) and listed(controller)["trees"]
    code, _ = controller.request("DELETE", path, headers=dict(token, **release_key(tree)))
    assert code == 200 and empty(controller)


def test_reservations_add_up_and_the_conflict_names_what_is_left(controller):
    code, first = post(controller, "/multicast/trees", dict(TREE, receivers=["h3"], bandwidth_mbps=12))
    code, answer = post(controller, "/multicast/trees", dict(TREE, receivers=["h4"], bandwidth_mbps=12))
    assert code == 409 and answer["max_feasible_mbps"] == pytest.approx(8.0)   # h1's own link
    code, second = post(controller, "/multicast/trees", dict(TREE, receivers=["h4"], bandwidth_mbps=8))
    assert code == 201
    for tree in (first, second):
        controller.request("DELETE", "/multicast/trees/%d" % tree["id"], headers=release_key(tree))
    assert empty(controller)


def test_a_switch_rejecting_the_tree_rolls_everything_back(controller):
    controller.switches["leaf2"].reject = lambda message: type(message).__name__ == "OFPGroupMod"
    code, answer = post(controller, "/multicast/trees", TREE)
    assert code == 500 and "nothing was installed" in answer["error"]
    assert "switch error" in answer["error"]
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    controller.switches["leaf2"].reject = lambda message: False
    code, again = post(controller, "/multicast/trees", dict(TREE, bandwidth_mbps=20))
    assert code == 201   # all bandwidth came back


def test_a_switch_that_never_confirms_rolls_back_after_the_timeout(controller):
    controller.switches["spine1"].silent = controller.switches["spine2"].silent = True
    code, answer = post(controller, "/multicast/trees", TREE)
    assert code == 500 and "no confirmation within" in answer["error"]
    assert listed(controller) == NOTHING_LISTED
    assert dict(controller.services.fabric.ledger.reserved_mbps) == {}


def test_a_switch_disconnecting_fails_the_installation_at_once(controller):
    """ryu.app.ofctl.service's _handle_dead: no waiting for the timeout."""
    controller.services.installer.timeout_s = 30.0
    controller.switches["leaf2"].silent = True
    started = time.monotonic()
    hub.spawn_after(0.05, controller.disconnect, "leaf2")
    code, answer = post(controller, "/multicast/trees", TREE)
    assert code == 500 and "disconnected" in answer["error"], answer
    assert time.monotonic() - started < 2.0
    assert listed(controller) == NOTHING_LISTED
    assert dict(controller.services.fabric.ledger.reserved_mbps) == {}


def test_a_delete_during_installation_leaves_nothing_and_the_post_says_so(controller):
    deletes = []

    def delete_while_installing(datapath, message):
        trees = controller.services.trees
        if not deletes and type(message).__name__ == "OFPBarrierReply" and trees.book.ids():
            (tree_id,) = trees.book.ids()
            deletes.append(hub.spawn(trees.release, tree_id, time.monotonic()))
    controller.network.before_answer = delete_while_installing
    code, answer = post(controller, "/multicast/trees", TREE)
    assert code == 409 and "released while being installed" in answer["error"]
    assert deletes[0].wait()["id"] == 1
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def test_a_tree_deleted_while_it_gets_a_backup_again_leaves_nothing(controller):
    _, tree = post(controller, "/multicast/trees", TREE)
    ((_, spine, _),) = tree["backup_uplinks"]
    controller.port_down("leaf1", spine)   # moved to the other spine: no backup left
    deletes = []

    def delete_while_moving(datapath, message):
        trees = controller.services.trees
        if not deletes and type(message).__name__ == "OFPBarrierReply":
            deletes.append(hub.spawn(trees.release, tree["id"], time.monotonic()))
    controller.network.before_answer = delete_while_moving
    controller.port_down("leaf1", spine, down=False)   # back: a backup again, as it is deleted
    assert deletes and deletes[0].wait()["id"] == tree["id"]
    controller.settle()
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def concurrently(controller, calls):
    """Run REST calls at the same moment; their statuses, sorted."""
    threads = [hub.spawn(controller.request, *call) for call in calls]
    return sorted(thread.wait()[0] for thread in threads)


def test_of_concurrent_deletes_exactly_one_wins_and_nothing_is_left(controller):
    _, tree = post(controller, "/multicast/trees", TREE)
    _, plan = post(controller, "/ina/plans", {"job": "j", "workers": ["h1", "h2", "h3"],
                                              "ps": "h4", "gradient_mb": 1})
    _, round_ = post(controller, "/selmcast/rounds", {"job": "r", "workers": ["h1", "h2", "h3"],
                                                      "update_mb": 0.1, "p": 1})
    for path, answer in (("/multicast/trees/%d", tree), ("/ina/plans/%d", plan),
                         ("/selmcast/rounds/%d", round_)):
        call = ("DELETE", path % answer["id"], None, release_key(answer))
        assert concurrently(controller, [call] * 4) == [200, 404, 404, 404]
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def test_a_round_with_nothing_to_send_is_created_with_no_tree(controller):
    status, round_ = post(controller, "/selmcast/rounds", {"job": "idle", "workers": ["h1", "h2"],
                                                           "update_mb": 1, "p": 0})
    assert status == 201, round_
    assert (round_["t_s"], round_["normalized_completion"], round_["trees"]) == (0.0, 1.0, [])


def test_leases_expire_and_deletes_racing_them_leave_nothing(controller):
    trees = [post(controller, "/multicast/trees", dict(TREE, bandwidth_mbps=1, ttl_s=0.3))[1]
             for _ in range(3)]
    assert all(0 < t["reservation"]["expires_in_s"] <= 0.3 + 1e-9 for t in trees)   # float sums
    hub.sleep(0.25)
    statuses = concurrently(controller, [("DELETE", "/multicast/trees/%d" % t["id"], None,
                                          release_key(t)) for t in trees])
    assert set(statuses) <= {200, 404}
    _, tree = post(controller, "/multicast/trees", dict(TREE, ttl_s=0.2))
    deadline = time.monotonic() + 3
    while listed(controller)["trees"] and time.monotonic() < deadline:
        hub.sleep(0.1)
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def test_loading_a_new_fabric_releases_every_tree_and_plan(controller):
    post(controller, "/multicast/trees", TREE)
    post(controller, "/ina/plans", {"job": "j", "workers": ["h1", "h2"], "ps": "h4", "gradient_mb": 1})
    code, _ = controller.request("PUT", "/fabric/topology", description())
    assert code == 200
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    code, tree = post(controller, "/multicast/trees", dict(TREE, bandwidth_mbps=20))
    assert code == 201   # the new ledger starts empty


def test_a_tree_s_ingress_fails_over_by_itself_then_the_tree_moves_off_the_backup(controller):
    _, tree = post(controller, "/multicast/trees", TREE)
    ((leaf, spine, backup),) = tree["backup_uplinks"]
    assert leaf == "leaf1" and {spine, backup} == {"spine1", "spine2"}
    assert ["leaf1", backup] not in tree["edges"]
    assert controller.state()[backup]["groups"] == [tree["id"]]   # its share waits there
    controller.link_down("leaf1", spine)   # before the controller hears of it
    assert delivered(controller, tree) == {"h2", "h3", "h4"}
    controller.port_down("leaf1", spine)
    _, now = controller.request("GET", "/multicast/trees/%d" % tree["id"])
    assert ["leaf1", backup] in now["edges"] and now["backup_uplinks"] == []   # no third spine
    assert delivered(controller, now) == {"h2", "h3", "h4"}
    state = controller.state()
    assert state["leaf1"]["groups"] == [tree["id"]] and state[spine]["groups"] == []
    controller.port_down("leaf1", spine, down=False)   # back: the tree stays, with a backup
    _, now = controller.request("GET", "/multicast/trees/%d" % tree["id"])
    assert ["leaf1", backup] in now["edges"] and now["backup_uplinks"] == [["leaf1", backup, spine]]
    assert controller.state()[spine]["groups"] == [tree["id"]]
    controller.link_down("leaf1", backup)
    assert delivered(controller, now) == {"h2", "h3", "h4"}


def test_a_failed_link_moves_the_tree_make_before_break(monkeypatch):
    monkeypatch.setenv("SYNCFABRIC_LOCAL_REPAIR", "0")   # the move alone
    controller = InProcessController(description())
    try:
        move_make_before_break(controller)
    finally:
        controller.close()


def move_make_before_break(controller):
    _, tree = post(controller, "/multicast/trees", TREE)
    assert tree["backup_uplinks"] == []
    spine = next(child for parent, child in tree["edges"] if parent == "leaf1")
    other = ({"spine1", "spine2"} - {spine}).pop()
    sent_before = len(controller.network.sent)
    controller.port_down("leaf1", spine)
    _, now = controller.request("GET", "/multicast/trees/%d" % tree["id"])
    assert (now["id"], now["address"], now["bandwidth_mbps"]) == (
        tree["id"], tree["address"], tree["bandwidth_mbps"])
    assert ["leaf1", other] in now["edges"] and ["leaf1", spine] not in now["edges"]
    assert delivered(controller, now) == {"h2", "h3", "h4"}
    state = controller.state()
    assert state[spine]["groups"] == [] and state[other]["groups"] == [tree["id"]]
    # make before break: the old spine loses the tree only after leaf1's group points to
    # the new spine and the new spine confirmed its share
    ofproto = controller.switches["leaf1"].ofproto
    groups = [(controller.view.switch_by_dpid[dpid], m.command)
              for dpid, m in controller.network.sent[sent_before:]
              if type(m).__name__ == "OFPGroupMod" and m.group_id == tree["id"]]
    assert groups.index((spine, ofproto.OFPGC_DELETE)) > max(
        groups.index(("leaf1", ofproto.OFPGC_MODIFY)), groups.index((other, ofproto.OFPGC_ADD)))
    barriers = [i for i, (dpid, m) in enumerate(controller.network.sent[sent_before:])
                if type(m).__name__ == "OFPBarrierRequest"
                and controller.view.switch_by_dpid[dpid] == other]
    deletes = [i for i, (dpid, m) in enumerate(controller.network.sent[sent_before:])
               if controller.view.switch_by_dpid[dpid] == spine and type(m).__name__ == "OFPGroupMod"]
    assert barriers and deletes and barriers[0] < deletes[0]


def test_a_move_s_break_waits_for_packets_on_the_old_path_and_counts_as_pending(controller):
    installer, datapath = controller.services.installer, controller.switches["leaf1"]
    removal = of.flow_removal(datapath, of.multicast_cookie(99), of.PRIORITY_MULTICAST,
                              of.tree_match(1, "239.9.9.9"))
    sent_before, started = len(controller.network.sent), time.monotonic()
    waiting = hub.spawn(installer.send_after_drain, {datapath: [removal]})
    hub.sleep(0.05)
    assert installer.pending() == 1 and len(controller.network.sent) == sent_before
    waiting.wait()
    assert time.monotonic() - started >= DRAIN_S
    assert controller.network.sent[sent_before][1] is removal
    controller.settle()
    assert installer.pending() == 0


def test_a_tree_that_fits_nowhere_after_a_failure_is_released(controller):
    post(controller, "/multicast/trees", dict(TREE, receivers=["h3"]))
    controller.port_down("leaf1", "spine1")
    controller.port_down("leaf1", "spine2")
    assert listed(controller)["trees"] == [] and empty(controller)


def test_a_tree_is_policed_once_at_its_ingress_switch_through_a_reroute(controller):
    _, tree = post(controller, "/multicast/trees", TREE)

    def metered():
        return {s: state["meters"] for s, state in controller.state().items() if state["meters"]}
    assert metered() == {"leaf1": [tree["id"]]}   # h1's switch; none downstream
    _flags, (band,) = controller.switches["leaf1"].table.meters[tree["id"]]
    assert band.rate == 5000
    spine = next(b for a, b in tree["edges"] if a == "leaf1")
    controller.port_down("leaf1", spine)
    moved = controller.request("GET", "/multicast/trees/%d" % tree["id"])[1]
    assert spine not in {b for a, b in moved["edges"] if a == "leaf1"}
    assert metered() == {"leaf1": [tree["id"]]} and delivered(controller, moved) == {"h2", "h3", "h4"}
    status, _ = controller.request("DELETE", "/multicast/trees/%d" % tree["id"],
                                   headers=release_key(tree))
    assert status == 200 and empty(controller)


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


PLAN = {"job": "j", "workers": ["h1", "h2", "h3"], "ps": "h4", "gradient_mb": 1}


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


def steered_to(controller, plan):
    """{(source, destination): the hosts a packet of each stream visits}."""
    visits = {}
    for worker, legs in plan["workers"].items():
        for leg in legs:
            visits[worker, leg["node"]] = walk_stream(controller, plan, worker, leg["node"], leg["ps"])
    for aggregate in plan["aggregates"]:
        visits[aggregate["aggregator"], aggregate["ps"]] = walk_stream(
            controller, plan, aggregate["aggregator"], aggregate["ps"], aggregate["ps"])
    return visits


def walk_stream(controller, plan, source, destination, ps):
    view = controller.view
    packet = {"eth_type": of.ETH_TYPE_IPV4, "ip_proto": of.IP_PROTO_UDP,
              "ipv4_src": view.ip(source), "ipv4_dst": view.ip(destination),
              "udp_dst": plan["ports"][ps]}
    return walk(view, controller.tables(), source, packet)


def stream_paths(plan):
    return ({(w, leg["node"]): leg["path"] for w, legs in plan["workers"].items() for leg in legs}
            | {(a["aggregator"], a["ps"]): a["path"] for a in plan["aggregates"]})


def test_a_failed_link_moves_a_plan_with_its_nodes_ports_and_rates_make_before_break(controller):
    _, plan = post(controller, "/ina/plans", PLAN)
    assert steered_to(controller, plan) == {k: list(p) for k, p in stream_paths(plan).items()}
    spine = next(p[p.index("leaf1") + 1] for p in stream_paths(plan).values()
                 if "leaf1" in p and p[p.index("leaf1") + 1].startswith("spine"))
    sent_before = len(controller.network.sent)
    controller.port_down("leaf1", spine)
    _, moved = controller.request("GET", "/ina/plans/%d" % plan["id"])
    assert moved["revision"] == 1
    same = ("id", "ports", "theta_mbps", "split", "addresses")
    assert {k: moved[k] for k in same} == {k: plan[k] for k in same}
    assert [(leg["node"], leg["rate_mbps"]) for legs in moved["workers"].values() for leg in legs] \
        == [(leg["node"], leg["rate_mbps"]) for legs in plan["workers"].values() for leg in legs]
    paths = stream_paths(moved)
    assert all(["leaf1", spine] != path[i:i + 2] and [spine, "leaf1"] != path[i:i + 2]
               for path in paths.values() for i in range(len(path) - 1))
    assert paths != stream_paths(plan)
    assert steered_to(controller, moved) == paths   # every packet takes its new path
    # make before break: nothing of the old state goes before every switch confirmed the new
    sent = controller.network.sent[sent_before:]
    ofproto = controller.switches["leaf1"].ofproto

    def is_break(message):
        return (type(message).__name__ == "OFPFlowMod" and message.command == ofproto.OFPFC_DELETE_STRICT
                or type(message).__name__ == "OFPMeterMod" and message.command == ofproto.OFPMC_DELETE)
    makes = [i for i, (_dpid, m) in enumerate(sent) if type(m).__name__ == "OFPFlowMod"
             and m.command == ofproto.OFPFC_ADD and m.cookie == of.steering_cookie(plan["id"])]
    breaks = [i for i, (_dpid, m) in enumerate(sent) if is_break(m)]
    made = {dpid for i, (dpid, _m) in enumerate(sent) if i in makes}
    confirmed = [max(i for i, (dpid, m) in enumerate(sent) if dpid == switch
                     and type(m).__name__ == "OFPBarrierRequest" and i > makes[0]) for switch in made]
    assert makes and breaks and max(confirmed) < min(breaks)
    held = controller.state()
    controller.connect(spine)   # a switch that syncs gets the moved plan's share only
    assert controller.state() == held
    status, _ = controller.request("DELETE", "/ina/plans/%d" % plan["id"], headers=release_key(plan))
    assert status == 200 and empty(controller)


def test_a_plan_that_cannot_keep_its_nodes_is_planned_again_and_one_that_fits_nowhere_released(
        controller, monkeypatch):
    from syncfabric.decisions.gradient_plan import PlacementError
    from syncfabric.services import plan_moves

    def no_detour(*_args):
        raise PlacementError("no detour (test)")
    monkeypatch.setattr(plan_moves, "moved_paths", no_detour)
    _, plan = post(controller, "/ina/plans", PLAN)
    spine = next(p[p.index("leaf1") + 1] for p in stream_paths(plan).values() if "leaf1" in p)
    controller.port_down("leaf1", spine)
    controller.settle_until(lambda: controller.services.plans.plans[plan["id"]].report["revision"])
    _, again = controller.request("GET", "/ina/plans/%d" % plan["id"])
    assert again["revision"] == 1 and again["ports"] == plan["ports"]
    assert not any(path[i:i + 2] in (["leaf1", spine], [spine, "leaf1"])
                   for path in stream_paths(again).values() for i in range(len(path) - 1))
    assert steered_to(controller, again) == stream_paths(again)
    reserved = dict(controller.services.fabric.ledger.reserved_mbps)
    for resource, load in again_loads(controller, again).items():
        assert reserved[resource] == pytest.approx(load)   # the new plan's loads, not the old
    other = ({"spine1", "spine2"} - {spine}).pop()
    controller.port_down("leaf1", other)   # h1 is cut off: no plan fits
    controller.settle_until(lambda: not controller.services.plans.plans)
    assert listed(controller)["plans"] == [] and empty(controller)


def test_a_plan_waits_for_a_switch_that_disconnected_before_it_is_planned_again(
        controller, monkeypatch):
    from syncfabric.decisions.gradient_plan import PlacementError
    from syncfabric.services import plan_moves

    def no_detour(*_args):
        raise PlacementError("no detour (test)")
    monkeypatch.setattr(plan_moves, "moved_paths", no_detour)
    monkeypatch.setattr(plan_moves, "RECONNECT_GRACE_S", 0.6)
    _, plan = post(controller, "/ina/plans", PLAN)
    spine = next(p[p.index("leaf1") + 1] for p in stream_paths(plan).values() if "leaf1" in p)
    held = controller.state()
    controller.disconnect(spine)    # it reconnects with its tables: the job notices nothing
    assert list(controller.services.plans.waiting) == [plan["id"]]
    controller.connect(spine, keep_table=True)
    _, now = controller.request("GET", "/ina/plans/%d" % plan["id"])
    assert now["revision"] == 0 and controller.state() == held
    assert controller.services.plans.waiting == {}
    controller.disconnect(spine)    # it stays away: planned again once the wait is over
    hub.sleep(0.3)
    assert controller.services.plans.plans[plan["id"]].report["revision"] == 0
    controller.settle_until(lambda: controller.services.plans.plans[plan["id"]].report["revision"])
    _, again = controller.request("GET", "/ina/plans/%d" % plan["id"])
    assert not any(spine in path for path in stream_paths(again).values())


def again_loads(controller, plan):
    """{link or aggregator: Mbit/s} the plan's streams put on it."""
    loads = {}
    streams = ([(leg["node"], leg["path"], leg["rate_mbps"]) for legs in plan["workers"].values()
                for leg in legs]
               + [(a["ps"], a["path"], a["rate_mbps"]) for a in plan["aggregates"]])
    for node, path, rate in streams:
        resources = list(zip(path, path[1:])) + ([node] if node in plan["aggregators"] else [])
        for resource in resources:
            loads[resource] = loads.get(resource, 0.0) + rate
    return loads


def test_a_round_whose_last_tree_is_refused_installs_nothing_and_keeps_no_history(controller):
    refused = {"armed": True}

    def reject_h3s_tree(message):   # the 3rd sender's tree starts at leaf2
        return refused["armed"] and type(message).__name__ == "OFPGroupMod" and message.group_id == 3
    controller.switches["leaf2"].reject = reject_h3s_tree
    body = {"job": "refused", "workers": ["h1", "h2", "h3"], "update_mb": 0.1, "p": 1}
    code, answer = post(controller, "/selmcast/rounds", body)
    assert code == 500 and "nothing was installed" in answer["error"]
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    refused["armed"] = False
    code, again = post(controller, "/selmcast/rounds", body)
    assert code == 201 and again["round"] == 1


def test_a_plan_without_capacity_gets_409_and_plans_and_trees_see_each_other(controller):
    _, hog = post(controller, "/multicast/trees", {"source": "h1", "receivers": ["h4"],
                                                   "bandwidth_mbps": 20})
    plan_body = {"job": "j", "workers": ["h1", "h2", "h3"], "ps": "h4", "gradient_mb": 1}
    code, answer = post(controller, "/ina/plans", plan_body)
    assert code == 409 and "no capacity" in answer["error"]
    controller.request("DELETE", "/multicast/trees/%d" % hog["id"], headers=release_key(hog))
    code, plan = post(controller, "/ina/plans", plan_body)
    assert code == 201 and plan["theta_mbps"] > 0
    code, answer = post(controller, "/multicast/trees", {"source": "h1", "receivers": ["h4"],
                                                         "bandwidth_mbps": 20})
    assert code == 409   # the plan holds part of h4's link
    controller.request("DELETE", "/ina/plans/%d" % plan["id"], headers=release_key(plan))
    assert empty(controller)


ROUND = {"job": "r", "workers": ["h1", "h2", "h3", "h4"], "update_mb": 0.2, "p": 1}


def test_the_k_rule_history_is_kept_per_job_and_l7_books_a_tree_per_copy(controller):
    rounds = []
    for _ in range(3):
        code, round_ = post(controller, "/selmcast/rounds", dict(ROUND, job="history", k=1))
        assert code == 201
        rounds.append(round_)
        controller.request("DELETE", "/selmcast/rounds/%d" % round_["id"], headers=release_key(round_))
    assert [r["round"] for r in rounds] == [1, 2, 3] and rounds[0]["forced_pairs"] == 0
    # with k = 1 every pair that did not sync in the previous round is forced in the next
    synced = {frozenset((s, r)) for s, rs in rounds[0]["assignment"].items() for r in rs}
    assert rounds[1]["forced_pairs"] == 6 - len(synced)
    code, answer = post(controller, "/selmcast/rounds", dict(ROUND, job="history", k=2))
    assert code == 400 and "uses k = 1" in answer["error"]
    _, fanout = post(controller, "/selmcast/rounds", dict(ROUND, job="fanout", p=2, cost_model="L7"))
    copies = sum(map(len, fanout["assignment"].values()))
    assert len(fanout["trees"]) == copies and all(len(t["receivers"]) == 1 for t in fanout["trees"])


def test_a_round_owns_its_trees_and_a_worker_without_bandwidth_gets_409(controller):
    _, round_ = post(controller, "/selmcast/rounds", ROUND)
    assert len(listed(controller)["trees"]) == len(round_["trees"])
    code, _ = controller.request("DELETE", "/multicast/trees/%d" % round_["trees"][0]["id"],
                                 headers=release_key(round_))
    assert code == 403   # released with the round only
    controller.request("DELETE", "/selmcast/rounds/%d" % round_["id"], headers=release_key(round_))
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    _, hog = post(controller, "/multicast/trees", {"source": "h2", "receivers": ["h1"],
                                                   "bandwidth_mbps": 20})
    code, answer = post(controller, "/selmcast/rounds", ROUND)
    assert code == 409 and "no bandwidth left on the link of h1, h2" in answer["error"]


@pytest.mark.parametrize("policy", ["inart", "atp"])
def test_a_two_ps_plan_steers_every_stream_and_leaves_nothing(controller, policy):
    code, plan = post(controller, "/ina/plans", {"job": "j", "workers": ["h1", "h2"],
                                                 "ps": ["h3", "h4"], "gradient_mb": 1,
                                                 "policy": policy})
    assert code == 201, plan
    assert sorted(plan["ports"]) == ["h3", "h4"] and sum(plan["split"].values()) == pytest.approx(1)
    meters = sum(len(s["meters"]) for s in controller.state().values())
    legs = sum(len(legs) for legs in plan["workers"].values()) + len(plan["aggregates"])
    assert meters == legs   # one meter per stream, on its first switch
    controller.request("DELETE", "/ina/plans/%d" % plan["id"], headers=release_key(plan))
    assert empty(controller)


def test_a_plan_deleted_during_installation_leaves_nothing_and_the_post_says_so(controller):
    deletes = []

    def delete_while_installing(datapath, message):
        plans = controller.services.plans
        if not deletes and type(message).__name__ == "OFPBarrierReply" and plans.plans:
            (plan_id,) = plans.plans
            deletes.append(hub.spawn(plans.release, plan_id, time.monotonic()))
    controller.network.before_answer = delete_while_installing
    code, answer = post(controller, "/ina/plans", {"job": "j", "workers": ["h1", "h2", "h3"],
                                                   "ps": "h4", "gradient_mb": 1})
    assert code == 409 and "released while being installed" in answer["error"], answer
    assert deletes[0].wait()["id"] == 1
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def changes_sent(controller, switch, since):
    """The flow, group and meter mods sent to `switch` since network.sent[since]."""
    dpid = controller.view.dpid(switch)
    return [m for d, m in controller.network.sent[since:] if d == dpid
            and type(m).__name__ in ("OFPFlowMod", "OFPGroupMod", "OFPMeterMod")]


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
    assert controller.state()["leaf1"]["groups"] == [tree["id"], of.failover_group_id(tree["id"], 0)]


def test_a_plan_made_while_a_link_is_down_avoids_it_and_one_cut_off_gets_409(controller):
    controller.port_down("leaf1", "spine1")
    code, plan = post(controller, "/ina/plans", PLAN)
    assert code == 201
    assert not any(path[i:i + 2] in (["leaf1", "spine1"], ["spine1", "leaf1"])
                   for path in stream_paths(plan).values() for i in range(len(path) - 1))
    controller.port_down("leaf1", "spine2")
    controller.settle_until(lambda: not controller.services.plans.plans)   # it fits nowhere now
    code, answer = post(controller, "/ina/plans", dict(PLAN, job="cut-off"))
    assert code == 409 and "no path from h1, h2 to h4" in answer["error"]
    assert empty(controller)
