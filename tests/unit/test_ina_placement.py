import itertools
import random

import networkx as nx
import pytest

from mininet_topos.description import describe
from mininet_topos.grid_example import GridExampleTopo
from mininet_topos.spineleaf import SpineLeafTopo
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.gradient_plan import Option, PlacementError
from syncfabric.decisions.ina_placement import plan
from syncfabric.decisions.ina_problem import (GRID, NEAREST, NO_INA, POLICIES, SWITCHML, InaProblem,
                                              candidate_paths, options_for)

WORKERS = ["w%d" % i for i in range(1, 9)]


def example_problem(**kwargs):
    view = FabricView(describe(GridExampleTopo(**kwargs)))
    return InaProblem(view.graph, WORKERS, "ps", view.aggregators)


def capacity(problem, resource):
    if isinstance(resource, tuple):
        return problem.graph.edges[resource]["capacity_mbps"]
    return problem.aggregators[resource]


def assert_within_capacities(problem, result):
    for resource, load in result.loads().items():
        assert load <= capacity(problem, resource) * (1 + 1e-6), resource


@pytest.mark.parametrize("policy, expected", [(NO_INA, 1.0), (NEAREST, 2.4375), (GRID, 3.0),
                                              (SWITCHML, 2.25)])
def test_worked_example_min_rates(policy, expected):
    problem = example_problem()
    result = plan(problem, policy)
    assert result.f == pytest.approx(expected, abs=0.01)
    assert result.f_lp >= result.f - 1e-9
    assert_within_capacities(problem, result)


def test_grid_aggregates_the_way_the_paper_does():
    result = plan(example_problem(), GRID)
    at = {a: result.workers_at((a, s)) for a, s in result.aggregate_paths}
    # three workers of s1 at s1, the fourth crosses to s2 and joins w5, w6; w7, w8 at s3
    assert sorted(map(len, at.values())) == [2, 3, 3]
    assert at["agg-s3"] == ["w7", "w8"]
    assert {"w5", "w6"} <= set(at["agg-s2"])
    crossing = [w for w in at["agg-s2"] if w not in ("w5", "w6")]
    assert len(crossing) == 1 and result.legs[crossing[0], "ps"][0][0].path[1:3] == ("s1", "s2")
    assert result.aggregate_paths["agg-s1", "ps"] == ("agg-s1", "s1", "s3", "ps")


def test_nearest_aggregates_what_capacity_allows_and_spills_the_rest_on_the_default_route():
    result = plan(example_problem(), NEAREST)
    (aggregated, share), (direct, rest) = result.legs["w1", "ps"]
    assert aggregated.node == "agg-s1" and direct.path == ("w1", "s1", "s3", "ps")
    assert result.f * share == pytest.approx(9 / 4)   # s1's capacity over its 4 workers
    assert share + rest == pytest.approx(1)
    assert [share for _option, share in result.legs["w7", "ps"]] == [1.0]


def tiny_problem(seed):
    """2-3 switches in a line or triangle, 2-3 workers, 1-2 aggregators, random capacities."""
    rng = random.Random(seed)
    graph = nx.DiGraph()
    switches = ["s%d" % i for i in range(rng.choice([2, 3]))]
    links = list(zip(switches, switches[1:])) + ([("s0", "s2")] if len(switches) == 3 and rng.random() < 0.5 else [])
    for a, b in links:
        c = rng.choice([1, 2, 3, 4])
        graph.add_edge(a, b, capacity_mbps=c)
        graph.add_edge(b, a, capacity_mbps=c)
    workers = ["w%d" % i for i in range(rng.choice([2, 3]))]
    aggregators = {"agg%d" % i: rng.choice([2, 3, 5, 8]) for i in range(rng.choice([1, 2]))}
    for host in workers + ["ps"] + list(aggregators):
        switch = rng.choice(switches)
        c = aggregators.get(host, rng.choice([3, 6, 10]))
        graph.add_edge(host, switch, capacity_mbps=c)
        graph.add_edge(switch, host, capacity_mbps=c)
    return InaProblem(graph, workers, "ps", aggregators)


def brute_force_theta(problem):
    """The best min rate over every assignment of one GRID option per worker and one
    path per aggregate, all streams at one rate."""
    options, aggregate_paths = options_for(problem, GRID)
    best = 0.0
    for choice in itertools.product(*(options[w] for w in problem.workers)):
        used = sorted({o.node for o in choice} - {problem.ps})
        for paths in itertools.product(*(aggregate_paths[a] for a in used)):
            streams = {}
            for option in choice:
                resources = list(zip(option.path, option.path[1:]))
                resources += [option.node] if option.node != problem.ps else []
                for r in resources:
                    streams[r] = streams.get(r, 0) + 1
            for path in paths:
                for edge in zip(path, path[1:]):
                    streams[edge] = streams.get(edge, 0) + 1
            best = max(best, min(capacity(problem, r) / n for r, n in streams.items()))
    return best


@pytest.mark.parametrize("seed", range(25))
def test_grid_finds_the_brute_force_optimum_on_tiny_instances(seed):
    problem = tiny_problem(seed)
    optimum = brute_force_theta(problem)
    result = plan(problem, GRID, trials=8, seed=seed)
    assert result.f_repaired == pytest.approx(optimum, rel=1e-6)
    assert result.f_lp >= optimum * (1 - 1e-9)   # a relaxation bounds every plan
    assert result.f >= optimum * (1 - 1e-9)      # splitting onto default routes only adds
    assert_within_capacities(problem, result)


@pytest.mark.parametrize("seed", range(25))
def test_with_one_option_per_worker_the_lp_is_the_exact_rate(seed):
    # SwitchML leaves no choice: the LP must equal capacity / streams at the worst resource
    problem = tiny_problem(seed)
    result = plan(problem, SWITCHML)
    streams = {}
    for _worker, option, _rate in result.leg_rates():
        for r in list(zip(option.path, option.path[1:])) + [option.node] * (option.node != "ps"):
            streams[r] = streams.get(r, 0) + 1
    for path in result.aggregate_paths.values():
        for edge in zip(path, path[1:]):
            streams[edge] = streams.get(edge, 0) + 1
    assert result.f_lp == pytest.approx(min(capacity(problem, r) / n
                                                for r, n in streams.items()))


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("policy", POLICIES)
def test_rounding_and_repair_never_exceed_a_capacity(seed, policy):
    rng = random.Random(seed)
    view = FabricView(describe(SpineLeafTopo(
        spines=3, leaves=4, hosts_per_leaf=3, bw=rng.choice([5, 10, 20]),
        aggregators=rng.choice(["leaves", "spines", "all", ["leaf1", "spine2"]]),
        aggregator_bw=rng.choice([4, 9, 30]))))
    hosts = [h for h in view.hosts if not view.is_aggregator(h)]
    rng.shuffle(hosts)
    problem = InaProblem(view.graph, hosts[:rng.randint(2, 10)], hosts[-1], view.aggregators)
    result = plan(problem, policy, seed=seed)
    assert result.f > 0
    assert_within_capacities(problem, result)
    for (worker, _ps), legs in result.legs.items():
        assert sum(share for _option, share in legs) == pytest.approx(1)
        for option, _share in legs:
            assert option.path[0] == worker and option.path[-1] == option.node
    for (aggregator, ps), path in result.aggregate_paths.items():
        assert path[0] == aggregator and path[-1] == ps == problem.ps
        assert result.workers_at((aggregator, ps))


def test_grid_beats_the_baselines_when_aggregators_are_the_bottleneck():
    view = FabricView(describe(SpineLeafTopo(spines=4, leaves=4, hosts_per_leaf=4, bw=20,
                                             aggregators="all", aggregator_bw=9)))
    hosts = [h for h in view.hosts if not view.is_aggregator(h)]
    problem = InaProblem(view.graph, hosts[:12], hosts[15], view.aggregators)
    theta = {p: plan(problem, p).f for p in POLICIES}
    assert theta[GRID] >= max(theta[NEAREST], theta[SWITCHML], theta[NO_INA]) * (1 - 1e-9)
    assert theta[GRID] > theta[NO_INA]


def test_candidate_paths_prefer_shortest_then_one_hop_longer():
    problem = example_problem()
    assert problem.paths("w1", "ps") == [("w1", "s1", "s3", "ps"), ("w1", "s1", "s2", "s3", "ps")]
    view = FabricView(describe(SpineLeafTopo(spines=8, leaves=8, hosts_per_leaf=1)))
    paths = candidate_paths(view.graph, "h1", "h2", 4)
    assert len(paths) == 4 == len({p[2] for p in paths})   # four different spines
    assert all(len(p) == 5 for p in paths)
    starts = {candidate_paths(view.graph, "h1", "h%d" % i, 4)[0][2] for i in range(2, 9)}
    assert len(starts) > 1   # pairs do not all start on the same spine


def test_bad_problems_are_refused():
    problem = example_problem()
    with pytest.raises(PlacementError, match="unknown node"):
        InaProblem(problem.graph, ["w1", "nobody"], "ps", problem.aggregators)
    with pytest.raises(PlacementError, match="distinct"):
        InaProblem(problem.graph, ["w1", "ps"], "ps", problem.aggregators)
    with pytest.raises(PlacementError, match="policy"):
        plan(problem, "fastest")
    assert Option("ps", ("w1", "s1", "s3", "ps")) in options_for(problem, NO_INA)[0]["w1"]


def test_the_authors_baselines_are_integral_and_named_apart_from_ours():
    """On the worked example the paper's ATP is integral: S1 takes W1-W4 at 9/4 = 2.25.
    Ours (`nearest`) is fluid and spills 0.1875 more per worker: 2.4375."""
    assert plan(example_problem(), "atp-tiered").f == pytest.approx(2.25)
    assert plan(example_problem(), NEAREST).f == pytest.approx(2.4375)


def test_the_authors_switchml_aggregates_off_the_default_route():
    view = FabricView(describe(SpineLeafTopo(spines=2, leaves=3, hosts_per_leaf=2, bw=20,
                                             aggregators="spines", aggregator_bw=30)))
    hosts = [h for h in view.hosts if not view.is_aggregator(h)]
    problem = InaProblem(view.graph, hosts[:4], hosts[-1], view.aggregators)
    ours = plan(problem, SWITCHML)          # the ToR only: leaves are not programmable
    theirs = plan(problem, "switchml-nearest")
    assert not ours.aggregate_paths and theirs.aggregate_paths
    assert theirs.f > ours.f
