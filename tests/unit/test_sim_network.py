"""The flow-level simulator (experiments/sim/network.py) on hand-checked cases."""

import random

import pytest

from experiments.sim.network import (Flow, SimulationError, capacities, path_flow, plan_flow,
                                     simulate, tree_flow)
from mininet_topos.description import describe
from mininet_topos.grid_example import GridExampleTopo
from mininet_topos.spineleaf import SpineLeafTopo
from syncfabric.decisions import ina_placement, ina_problem
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.multicast_trees import compute_tree
from syncfabric.decisions.unicast_routes import host_pair_paths
from tests.harness.fabrics import spine_leaf_view


def test_a_bottleneck_shared_by_flows_of_different_paths():
    # a: 10, b: 2. f1 crosses a and b, f2 and f3 only a: b fills first, f1 gets 2, and
    # f2 and f3 share the other 8 of a, 4 each; f2 (4 Mbit) ends at 1 s, then f3 gets 8
    # and its last 4 Mbit take 0.5 s more; f1 (4 Mbit) goes at 2 throughout
    flows = [Flow("f1", {"a": 1, "b": 1}, 4), Flow("f2", {"a": 1}, 4), Flow("f3", {"a": 1}, 8)]
    result = simulate(flows, {"a": 10, "b": 2})
    assert result.finish_s == pytest.approx({"f1": 2.0, "f2": 1.0, "f3": 1.5})
    assert result.events == 3 and result.max_utilization == pytest.approx(1.0)


def test_a_flow_starting_later_takes_its_share_from_then_on():
    flows = [Flow("early", {"a": 1}, 10), Flow("late", {"a": 1}, 2, start_s=0.5)]
    # early alone at 10 for 0.5 s (5 Mbit), then 5 each: late ends at 0.9 and early has
    # 3 left, alone again: 1.2
    assert simulate(flows, {"a": 10}).finish_s == pytest.approx({"early": 1.2, "late": 0.9})


def test_a_tree_goes_at_its_bottleneck_a_downlink_shared_with_unicast():
    # leaf1-spine1 10, the rest 20: a tree from h1 to hosts on leaves 2 and 3
    view = FabricView(describe(SpineLeafTopo(spines=1, leaves=3, hosts_per_leaf=1,
                                             bw=[20, 20, 10], host_bw=20)))
    tree = compute_tree(view, "h1", ["h2", "h3"], 5.0)
    assert ("spine1", "leaf3") in tree.edges
    unicast = path_flow("u", view, "h2", ["leaf2", "spine1", "leaf3"], "h3", 50)
    result = simulate([tree_flow("t", tree, 50), unicast], capacities(view))
    # both share spine1->leaf3 (10): 5 each
    assert result.finish_s == pytest.approx({"t": 10.0, "u": 10.0})
    assert result.peak_load[("spine1", "leaf3")] == pytest.approx(10.0)


def test_a_reserved_tree_on_an_idle_fabric_ends_at_size_over_its_reservation():
    view = spine_leaf_view(8, 8, 2, bw=20)
    tree = compute_tree(view, "h1", ["h%d" % n for n in range(2, 17)], 19.0)
    result = simulate([tree_flow("t", tree, 40.0, reserved_mbps=19.0)], capacities(view))
    assert result.finish_s["t"] == pytest.approx(40.0 / 19.0)


def test_no_resource_is_ever_over_capacity():
    view = spine_leaf_view(4, 4, 3, bw=20)
    rng = random.Random(3)
    hosts = sorted(view.hosts)
    paths = host_pair_paths(view)
    flows = []
    for number in range(60):
        source, destination = rng.sample(hosts, 2)
        flows.append(path_flow("u%d" % number, view, source, paths[source, destination],
                               destination, rng.uniform(1, 30), start_s=rng.uniform(0, 3)))
    for number in range(5):
        source, *receivers = rng.sample(hosts, 6)
        flows.append(tree_flow("t%d" % number, compute_tree(view, source, receivers, 1.0),
                               rng.uniform(1, 30), rng.uniform(0, 3), reserved_mbps=8.0))
    result = simulate(flows, capacities(view))
    limits = capacities(view)
    assert all(load <= limits[r] * (1 + 1e-9) for r, load in result.peak_load.items())
    assert result.max_utilization <= 1 + 1e-9 and len(result.finish_s) == 65
    assert result.events >= 65


def test_a_grid_plan_runs_at_its_planned_rate():
    view = FabricView(describe(GridExampleTopo()))
    workers = ["w%d" % n for n in range(1, 9)]
    problem = ina_problem.InaProblem(view.graph, workers, "ps", dict(view.aggregators))
    planned = ina_placement.plan(problem, ina_problem.GRID)
    job = plan_flow("grid", planned, 30.0)
    result = simulate([job], capacities(view))
    assert planned.f == pytest.approx(3.0)
    assert result.finish_s["grid"] == pytest.approx(30.0 / 3.0)
    assert result.max_utilization == pytest.approx(1.0)


def test_what_cannot_be_simulated_is_refused():
    with pytest.raises(ValueError, match="unknown resource"):
        simulate([Flow("f", {"x": 1}, 1)], {"a": 1})
    with pytest.raises(SimulationError, match="never finish"):
        simulate([Flow("f", {"a": 1}, 1)], {"a": 0.0})
    with pytest.raises(ValueError, match="unique"):
        simulate([Flow("f", {"a": 1}, 1), Flow("f", {"a": 1}, 1)], {"a": 1})
