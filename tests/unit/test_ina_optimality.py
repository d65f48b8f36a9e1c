"""GRID's and InArt's plans against the integral optimum over their options: the MILP
(syncfabric/decisions/exact_placement.py), group moves, and the gap every plan reports, checked against
a brute force on seeded random small fabrics (experiments/ina_optimality.py)."""

import random

import pytest

from experiments.ina_optimality import KINDS, brute_force, random_instance
from syncfabric.decisions import group_moves, ina_placement, ina_problem, inart_placement
from syncfabric.decisions.exact_placement import exact_assignment
from syncfabric.decisions.ina_problem import GRID, InaProblem, capacity_of, options_for
from syncfabric.decisions.inart_placement import INART, InartProblem
from tests.unit.test_ina_placement import brute_force_theta, tiny_problem


def grid_oracle(problem, start=0.0):
    """The integral optimum by brute force; start: a rate known to be reachable, which
    only prunes (the answer is still exact)."""
    options, aggregate_paths = ina_problem.fragment_options(problem, GRID)
    return brute_force(options, aggregate_paths, {key: 1.0 for key in options},
                       lambda resource: capacity_of(problem, resource), start)


def grid_instance(seed, workers=None):
    rng = random.Random(seed)
    count = workers or rng.randint(3, 4)
    graph, names, (ps,), aggregators = random_instance(rng, KINDS[seed % len(KINDS)], count, 1)
    return InaProblem(graph, names, ps, aggregators)


@pytest.mark.parametrize("seed", range(25))
def test_the_oracle_agrees_with_plain_enumeration(seed):
    problem = tiny_problem(seed)
    assert grid_oracle(problem) == pytest.approx(brute_force_theta(problem), rel=1e-9)


@pytest.mark.parametrize("seed", range(40))
def test_grid_reaches_the_integral_optimum_and_reports_no_gap(seed):
    problem = grid_instance(seed, workers=3 + seed % 4)
    result = ina_placement.plan(problem, GRID)
    optimum = grid_oracle(problem)
    assert result.f_repaired >= 0.99 * optimum   # one option per worker, as the oracle
    assert result.f >= result.f_repaired * (1 - 1e-9)   # splitting onto default routes only adds
    assert result.f_bound == pytest.approx(optimum, rel=1e-6)   # the MILP finished: its optimum
    assert result.optimality_gap == 0.0


@pytest.mark.parametrize("seed", range(12))
def test_inart_reaches_the_integral_optimum_for_its_split(seed):
    rng = random.Random(1000 + seed)
    graph, workers, pss, aggregators = random_instance(rng, KINDS[seed % len(KINDS)], 3, 2)
    problem = InartProblem(graph, workers, pss, aggregators)
    result = inart_placement.plan(problem, INART)
    options, aggregate_paths = inart_placement.fragment_options(problem, INART)
    optimum = brute_force(options, aggregate_paths, {k: result.split[k[1]] for k in options},
                          lambda resource: capacity_of(problem, resource))
    assert result.f_repaired >= 0.99 * optimum
    assert result.optimality_gap == 0.0


def test_without_the_milp_grid_misses_an_optimum_the_milp_finds():
    """A fat-tree-like instance where rounding, repair and group moves stop at 65% of the
    optimum (one worker sent straight to the PS blocks the aggregate)."""
    problem = grid_instance(97)
    optimum = grid_oracle(problem)
    heuristic = ina_placement.plan(problem, GRID, exact_time_s=0)
    exact = ina_placement.plan(problem, GRID)
    assert heuristic.f_repaired < 0.7 * optimum
    assert exact.f_repaired == pytest.approx(optimum, rel=1e-9)
    assert heuristic.optimality_gap > 0   # and without the MILP the plan says it may be off


def test_group_moves_reach_what_single_moves_cannot(monkeypatch):
    """Three workers whose best plan shares one aggregator: no single move gets there."""
    problem = grid_instance(51)
    optimum = grid_oracle(problem)
    monkeypatch.setattr(group_moves, "MAX_GROUP_ROUNDS", 0)
    single = ina_placement.plan(problem, GRID, exact_time_s=0)
    monkeypatch.undo()
    grouped = ina_placement.plan(grid_instance(51), GRID, exact_time_s=0)
    assert single.f_repaired < 0.9 * optimum
    assert grouped.f_repaired == pytest.approx(optimum, rel=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_a_budget_too_short_for_the_milp_still_gives_a_plan_and_a_true_bound(seed):
    problem = grid_instance(seed, workers=6)
    result = ina_placement.plan(problem, GRID, exact_time_s=1e-3)
    optimum = grid_oracle(problem, start=result.f_repaired * (1 - 1e-9))
    assert result.optimality_gap >= 0.0
    assert result.f_bound >= optimum * (1 - 1e-9)   # a bound, whatever the MILP got to


@pytest.mark.parametrize("seed", range(10))
def test_the_milp_alone_finds_the_optimum_and_says_it_is_optimal(seed):
    problem = tiny_problem(seed)
    options, aggregate_paths = options_for(problem, GRID)
    exact = exact_assignment(options, aggregate_paths, {w: 1.0 for w in problem.workers},
                             lambda _w, o: None if o.node == problem.ps else o.node,
                             lambda resource: capacity_of(problem, resource), 5.0)
    assert exact.optimal and exact.f == pytest.approx(brute_force_theta(problem), rel=1e-9)
    assert exact.f_bound == exact.f
