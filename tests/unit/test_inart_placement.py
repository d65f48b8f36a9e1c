import itertools
import random

import pytest

from mininet_topos.description import describe
from mininet_topos.fattree import FatTreeTopo
from mininet_topos.inart_example import InartExampleTopo
from mininet_topos.spineleaf import SpineLeafTopo
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.gradient_plan import PlacementError, edges_of
from syncfabric.decisions.ina_problem import capacity_of
from syncfabric.decisions.inart_placement import (ATP, EQUAL_SPLIT, INART, LBMM, POLICIES,
                                                  InartProblem, model_split, plan)

TOY_WORKERS = ["w%d" % i for i in range(1, 7)]


def toy_problem(workers=TOY_WORKERS):
    view = FabricView(describe(InartExampleTopo()))
    return InartProblem(view.graph, workers, ["s1", "s2"], view.aggregators)


def assert_within_capacities(problem, result):
    for resource, load in result.loads().items():
        assert load <= capacity_of(problem, resource) * (1 + 1e-6), resource


def test_the_toy_split_is_the_relaxed_optimum():
    # f = 3 is the most: 6f of fragments, of which A <= 12 aggregated; every aggregate
    # runs at least at its largest input (>= A_as / 6), so the PSs take in
    # 6f - A + A / 6 <= 8, i.e. 6f <= 8 + 10. And f = 3 is reached: every worker
    # sends 1 of each 1.5 fragment to v1 (for s1) and to v2 (for s2).
    split = model_split(toy_problem())
    assert split.rate == pytest.approx(3.0)
    assert sum(split.shares.values()) == pytest.approx(1.0)
    assert all(x >= 0 for x in split.shares.values())


@pytest.mark.parametrize("seed", range(3))
def test_the_split_respects_the_relaxed_constraints(seed):
    rng = random.Random(seed)
    view = FabricView(describe(SpineLeafTopo(spines=2, leaves=3, hosts_per_leaf=3, bw=20,
                                             aggregators="all", aggregator_bw=rng.choice([4, 9]))))
    hosts = [h for h in view.hosts if not view.is_aggregator(h)]
    rng.shuffle(hosts)
    problem = InartProblem(view.graph, hosts[2:8], hosts[:2], view.aggregators)
    split = model_split(problem)
    x, eps = split.solution, 1e-6
    assert sum(split.shares.values()) == pytest.approx(1.0)
    assert sum(x["g", s] for s in problem.pss) == pytest.approx(split.rate, rel=1e-6)
    for w, s in problem.fragments:   # each fragment aggregated somewhere or sent on whole
        placed = x["u", w, s] + sum(v for k, v in x.items() if k[:3] == ("h", w, s))
        assert placed >= x["g", s] - eps
    for key, value in x.items():     # an aggregate runs at least at each of its inputs
        if key[0] == "h":
            assert value <= x["z", key[3], key[2]] + eps
    for a, capacity in problem.aggregators.items():
        assert sum(v for k, v in x.items() if k[0] == "h" and k[3] == a) <= capacity + eps
    for s in problem.pss:
        ingress = sum(v for k, v in x.items() if (k[0] == "u" and k[2] == s)
                      or (k[0] == "z" and k[2] == s))
        assert ingress <= problem.ingress(s) + eps


def test_the_split_is_limited_by_ps_ingress_without_aggregators():
    view = FabricView(describe(InartExampleTopo()))
    problem = InartProblem(view.graph, TOY_WORKERS, ["s1", "s2"], {})
    split = model_split(problem)
    assert split.rate == pytest.approx(8 / 6)   # both PSs full: 6 workers x f = 4 + 4


@pytest.mark.parametrize("policy, paper", [(LBMM, 4 / 3), (ATP, 2.0), (INART, 2.5),
                                           (EQUAL_SPLIT, 2.0)])
def test_toy_rates_are_at_least_the_papers(policy, paper):
    problem = toy_problem()
    result = plan(problem, policy)
    assert result.f >= paper - 1e-9
    assert result.f_lp >= result.f - 1e-9
    assert sum(result.split.values()) == pytest.approx(1.0)
    assert_within_capacities(problem, result)


def test_inart_is_the_best_on_the_toy_and_lbmm_is_exactly_the_papers():
    problem = toy_problem()
    rates = {policy: plan(problem, policy).f for policy in POLICIES}
    assert rates[LBMM] == pytest.approx(4 / 3)
    assert rates[INART] == pytest.approx(max(rates.values()))
    # with the paper's split our phase 2 finds the paper's plan rate
    assert plan(problem, INART, split={"s1": 0.6, "s2": 0.4}).f == pytest.approx(2.5)


def integral_optimum(problem, result_options, aggregate_paths, split):
    """f of the best plan with one option per fragment and one path per aggregate."""
    keys = sorted(result_options)
    best = 0.0
    for choice in itertools.product(*(result_options[k] for k in keys)):
        for paths in itertools.product(*(aggregate_paths[a] for a in sorted(aggregate_paths))):
            path_of = dict(zip(sorted(aggregate_paths), paths))
            load = {}
            used = set()
            for (w, s), option in zip(keys, choice):
                resources = list(edges_of(option.path))
                if option.node != s:
                    resources.append(option.node)
                    used.add((option.node, s))
                for r in resources:
                    load[r] = load.get(r, 0.0) + split[s]
            for a, s in used:
                for edge in edges_of(path_of[a, s]):
                    load[edge] = load.get(edge, 0.0) + split[s]
            best = max(best, min(capacity_of(problem, r) / v for r, v in load.items()))
    return best


@pytest.mark.parametrize("workers", [["w1", "w5"], ["w1", "w2", "w6"]])
def test_phase_2_bounds_and_finds_the_brute_force_optimum_on_tiny_instances(workers):
    from syncfabric.decisions.ina_problem import GRID, options_for
    problem = toy_problem(workers)
    split = {"s1": 0.5, "s2": 0.5}
    options, aggregate_paths = {}, {}
    for s in problem.pss:
        per_worker, per_aggregator = options_for(problem.per_ps[s], GRID)
        options.update({(w, s): per_worker[w] for w in workers})
        aggregate_paths.update({(a, s): paths for a, paths in per_aggregator.items()})
    optimum = integral_optimum(problem, options, aggregate_paths, split)
    result = plan(problem, EQUAL_SPLIT)
    assert result.f_lp >= optimum - 1e-9
    assert result.f == pytest.approx(optimum)
    assert result.f_repaired >= result.f_rounded - 1e-9


@pytest.mark.parametrize("seed", range(4))
def test_rounding_and_repair_never_exceed_a_capacity(seed):
    rng = random.Random(seed)
    topo = SpineLeafTopo(spines=4, leaves=4, hosts_per_leaf=4, bw=20, aggregators="all",
                         aggregator_bw=rng.choice([5, 9, 15]))
    view = FabricView(describe(topo))
    hosts = [h for h in view.hosts if not view.is_aggregator(h)]
    rng.shuffle(hosts)
    pss = hosts[:rng.choice([2, 3])]
    problem = InartProblem(view.graph, hosts[len(pss):len(pss) + 8], pss, view.aggregators)
    for policy in POLICIES:
        result = plan(problem, policy, seed=seed)
        assert_within_capacities(problem, result)
        assert result.f > 0 and result.f_lp >= result.f - 1e-6


def test_every_fragment_is_placed_once_and_aggregates_have_paths_to_their_ps():
    problem = toy_problem()
    result = plan(problem, INART)
    assert set(result.legs) == set(problem.fragments)
    for (worker, ps), legs in result.legs.items():
        assert sum(share for _option, share in legs) == pytest.approx(1.0)
        for option, _share in legs:
            assert option.path[0] == worker and option.path[-1] == option.node
            if option.node != ps:
                assert result.aggregate_paths[option.node, ps][-1] == ps


def test_bad_jobs_are_refused():
    view = FabricView(describe(InartExampleTopo()))
    with pytest.raises(PlacementError, match="at least one PS"):
        InartProblem(view.graph, TOY_WORKERS, [], view.aggregators)
    with pytest.raises(PlacementError, match="distinct"):
        InartProblem(view.graph, TOY_WORKERS, ["s1", "s1"], view.aggregators)
    with pytest.raises(PlacementError, match="distinct"):
        InartProblem(view.graph, TOY_WORKERS, ["s1", next(iter(view.aggregators))],
                     view.aggregators)
    with pytest.raises(PlacementError, match="unknown"):
        InartProblem(view.graph, TOY_WORKERS, ["s1", "nowhere"], view.aggregators)
    with pytest.raises(PlacementError, match="policy"):
        plan(toy_problem(), "fastest")


def test_a_ps_that_is_also_a_worker_keeps_its_own_fragment():
    view = FabricView(describe(InartExampleTopo()))
    pss = TOY_WORKERS[:2]
    problem = InartProblem(view.graph, TOY_WORKERS, pss, view.aggregators)
    assert set(problem.fragments) == {(w, s) for w in TOY_WORKERS for s in pss if w != s}
    result = plan(problem, EQUAL_SPLIT)
    assert set(result.legs) == set(problem.fragments) and result.f > 0
    assert all(source != destination for source, destination, *_rest in result.streams())


def test_a_grid_plan_is_the_one_ps_case_of_an_inart_plan():
    from mininet_topos.grid_example import GridExampleTopo
    from syncfabric.decisions import ina_placement, ina_problem
    from syncfabric.decisions.gradient_plan import GradientPlan
    view = FabricView(describe(GridExampleTopo()))
    workers = ["w%d" % i for i in range(1, 9)]
    grid = ina_placement.plan(ina_problem.InaProblem(view.graph, workers, "ps", view.aggregators),
                              ina_problem.GRID)
    one_ps = plan(InartProblem(view.graph, workers, ["ps"], view.aggregators), EQUAL_SPLIT)
    assert type(grid) is type(one_ps) is GradientPlan
    assert grid.split == one_ps.split == {"ps": 1.0}
    assert set(grid.legs) == set(one_ps.legs) == {(w, "ps") for w in workers}
    assert grid.f_lp == pytest.approx(one_ps.f_lp)   # one LP: GRID's options, one PS


def test_on_a_fat_tree_where_phase_1_splits_worse_inart_takes_the_equal_split():
    # InArt's emulated fat-tree (k = 6) with 20 workers and 2 PSs: phase 1's split plans
    # 4.75 Mbit/s, the equal split 5
    view = FabricView(describe(FatTreeTopo(k=6, hosts_per_edge=3, bw=20, aggregators="all",
                                           aggregator_bw=9)))
    hosts = sorted((h for h in view.hosts if not view.is_aggregator(h)), key=lambda h: int(h[1:]))
    random.Random(0).shuffle(hosts)
    problem = InartProblem(view.graph, hosts[2:22], hosts[:2], view.aggregators)
    result = plan(problem, INART)
    assert result.f == pytest.approx(5.0) and result.split == plan(problem, EQUAL_SPLIT).split
