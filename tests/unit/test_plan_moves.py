"""Moving a gradient plan around failed links, without a controller: the new paths
(gradient_plan.moved_paths), the plan that keeps its nodes and rates, what a state file
keeps of it, and the switch changes that take a switch from one share to the next."""

import networkx as nx
import pytest

from syncfabric.decisions import ina_placement
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.gradient_plan import (NO_SHARE, GradientPlan, PlacementError,
                                                SteeringShare, edges_of, moved_paths,
                                                steering_shares)
from syncfabric.decisions.ina_problem import InaProblem
from syncfabric.decisions.sync_history import SyncHistory
from syncfabric.openflow import steering_messages as steering
from tests.harness.fake_controller import description
from tests.harness.fake_openflow import FakeFlowTable, fake_datapath


@pytest.fixture(scope="module")
def view():
    return FabricView(description(spines=2, leaves=3))


@pytest.fixture(scope="module")
def plan(view):
    problem = InaProblem(view.graph.copy(), ["h1", "h2", "h3"], "h6",
                         {a: view.aggregators[a] for a in view.aggregators})
    return ina_placement.plan(problem)


def broken_link(plan):
    """A leaf-spine link the plan's first stream crosses."""
    path = plan.streams()[0][2]
    return frozenset(next(edge for edge in edges_of(path)
                          if {n[:4] for n in edge} == {"leaf", "spin"}))


def test_moved_paths_avoid_the_down_links_keep_the_rest_and_fit_the_capacity(view, plan):
    down = {broken_link(plan)}
    streams = plan.streams()
    paths = moved_paths(view.graph, streams, down)
    load = {}
    for (source, destination, old, rate, _ps), path in zip(streams, paths):
        assert (path[0], path[-1]) == (source, destination)
        assert not any(frozenset(e) in down for e in edges_of(path))
        if not any(frozenset(e) in down for e in edges_of(old)):
            assert path == tuple(old)
        for edge in edges_of(path):
            load[edge] = load.get(edge, 0.0) + rate
    assert all(load[e] <= view.graph.edges[e]["capacity_mbps"] * (1 + 1e-6) for e in load)
    assert paths != [tuple(s[2]) for s in streams]


def test_moved_paths_refuse_when_no_path_has_room(view, plan):
    source = plan.streams()[0][0]
    leaf = next(iter(view.graph.successors(source)))
    cut = {frozenset((leaf, spine)) for spine in view.graph.successors(leaf) if spine.startswith("spine")}
    with pytest.raises(PlacementError, match="no path from h[12] "):   # both are on the leaf
        moved_paths(view.graph, plan.streams(), cut)
    narrow = view.graph.copy()
    nx.set_edge_attributes(narrow, 0.001, "capacity_mbps")
    with pytest.raises(PlacementError):
        moved_paths(narrow, plan.streams(), {broken_link(plan)})


def test_a_moved_plan_keeps_nodes_shares_and_rates_and_survives_a_state_file(view, plan):
    paths = moved_paths(view.graph, plan.streams(), {broken_link(plan)})
    moved = plan.with_stream_paths(paths)
    assert [tuple(s[2]) for s in moved.streams()] == paths
    assert [(s[0], s[1], s[3], s[4]) for s in moved.streams()] == [
        (s[0], s[1], s[3], s[4]) for s in plan.streams()]
    assert moved.f == plan.f and moved.aggregate_rates() == plan.aggregate_rates()
    again = GradientPlan.from_record(moved.record())
    assert again == moved and again.loads() == moved.loads()


def test_steering_changes_take_a_switch_from_one_share_to_the_next_and_back(view, plan):
    datapath = fake_datapath()
    before = steering_shares(view, plan.streams(), {"h6": 20001})
    moved = plan.with_stream_paths(moved_paths(view.graph, plan.streams(), {broken_link(plan)}))
    after = steering_shares(view, moved.streams(), {"h6": 20001})
    for switch in set(before) | set(after):
        old, new = before.get(switch, NO_SHARE), after.get(switch, NO_SHARE)
        table, fresh = FakeFlowTable(), FakeFlowTable()
        for message in steering.steering_changes(datapath, 7, NO_SHARE, old)[0]:
            table.apply(message)
        make, then_break = steering.steering_changes(datapath, 7, old, new)
        for message in make + then_break:   # OVS would refuse a make that breaks a flow
            table.apply(message)
        for message in steering.steering_changes(datapath, 7, NO_SHARE, new)[0]:
            fresh.apply(message)
        assert table.state() == fresh.state(), switch
        assert not any(type(m).__name__ == "OFPMeterMod" and m.command == datapath.ofproto.OFPMC_DELETE
                       or getattr(m, "command", None) == datapath.ofproto.OFPFC_DELETE_STRICT
                       for m in make)


def test_a_rate_change_modifies_the_meter_in_place():
    datapath = fake_datapath()
    key = ("10.0.0.1", "10.0.0.4", 20001)
    old = SteeringShare({key: (3, 9)}, {9: 4.0})
    new = SteeringShare({key: (3, 9)}, {9: 2.5})
    make, then_break = steering.steering_changes(datapath, 1, old, new)
    assert then_break == [] and [(type(m).__name__, m.command) for m in make] == [
        ("OFPMeterMod", datapath.ofproto.OFPMC_MODIFY)]
    assert make[0].bands[0].rate == 2500


def test_a_sync_history_survives_a_state_file():
    history = SyncHistory(2)
    history.record_round(["a", "b", "c"], [[1], [], [0]])
    history.record_round(["a", "b", "c"], [[], [2], []])
    again = SyncHistory.from_record_data(history.record_data())
    for names in (["a", "b", "c"], ["c", "a", "b"]):
        assert all((x == y).all() for x, y in zip(again.matrices(names), history.matrices(names)))
    assert again.completed_rounds == 2 and again.k == 2
