"""The INA plans service in-process on fake switches: plans steer every stream, move or
are planned again around failed links, and leave nothing when refused or deleted."""

import time

import pytest
from ryu.lib import hub

from syncfabric.decisions import round_planner
from syncfabric.decisions.sparse_lp import SparseLp
from syncfabric.openflow import steering_messages as steering
from tests.harness.in_process import (NOTHING_LISTED, PLAN, again_loads, empty, listed, post,
                                      release_key, steered_to, stream_paths)


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
             and m.command == ofproto.OFPFC_ADD and m.cookie == steering.steering_cookie(plan["id"])]
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
    reserved = dict(controller.services.fabric.book.reserved_mbps)
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


def test_an_equal_split_too_wide_for_the_lp_goes_straight_to_its_shards(controller, monkeypatch):
    """Past LP_FRAGMENTS (100 workers x 100 shards) an equal split is planned without an
    LP, as the round planner plans it: every worker straight to every shard, no
    aggregator, every stream steered, nothing left."""
    monkeypatch.setattr(round_planner, "LP_FRAGMENTS", 3)

    def no_lp(*_args, **_kwargs):
        raise AssertionError("an LP was solved")
    monkeypatch.setattr(SparseLp, "maximize", no_lp)
    code, plan = post(controller, "/ina/plans", {"job": "j", "workers": ["h1", "h2"],
                                                 "ps": ["h3", "h4"], "gradient_mb": 1,
                                                 "policy": "equal-split"})
    assert code == 201, plan
    assert plan["aggregates"] == [] and plan["theta_mbps"] > 0
    assert {(w, leg["ps"], leg["node"]) for w, legs in plan["workers"].items() for leg in legs} \
        == {(w, s, s) for w in ("h1", "h2") for s in ("h3", "h4")}
    meters = sum(len(s["meters"]) for s in controller.state().values())
    assert meters == 4
    controller.request("DELETE", "/ina/plans/%d" % plan["id"], headers=release_key(plan))
    assert empty(controller)


def test_a_ps_in_an_aggregator_sums_its_own_shard_and_aggregates_for_no_other(controller):
    body = {"job": "j", "workers": ["h1", "h3"], "ps": ["agg-spine1", "agg-spine2"],
            "gradient_mb": 1, "policy": "equal-split"}
    code, answer = post(controller, "/ina/plans", dict(body, aggregators=["agg-spine1"]))
    assert code == 400 and "agg-spine1 holds a PS" in answer["error"] and empty(controller)
    code, plan = post(controller, "/ina/plans", body)   # by default: every other aggregator
    assert code == 201, plan
    assert plan["aggregates"] == [] and sorted(plan["ports"]) == body["ps"]
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
