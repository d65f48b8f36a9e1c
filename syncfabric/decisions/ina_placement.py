"""GRID (Fang et al., IEEE/ACM ToN 2023) and its baselines: where each worker's gradient
is aggregated, and along which path, so that the minimum worker sending rate theta is
largest. The placement LP (gradient_plan) is solved over the candidates of ina_problem,
rounded as R-GRIA does, repaired by local search (stream_assignment) and checked
against the MILP (exact_placement). docs/grid-model.md has the model and the baselines.
"""

import random as random_module
from dataclasses import dataclass, replace

from syncfabric.decisions.exact_placement import DEFAULT_TIME_S
from syncfabric.decisions.gradient_plan import GradientPlan, solve_placement_lp
from syncfabric.decisions.ina_problem import (GRID, NEAREST, NO_INA, TIERED, TOLERANCE, capacity_of,
                                              default_route, load_with_returns, options_for)
from syncfabric.decisions.stream_assignment import StreamAssignment, pick, with_exact

MAX_TIER_ROUNDS = 20
DEFAULT_TRIALS = 8


def _tiered_plan(problem, options, aggregate_paths):
    """The authors' baselines, integral: each worker takes the first of its options whose
    aggregator still has processing capacity for one more stream at rate f (its last
    option otherwise); f is then what that assignment achieves with every link counted.
    Starting from unlimited capacity, f is fed back while the rounds change the plan;
    the best f wins. Returns (f, legs, aggregate paths)."""
    ps = problem.ps
    best, rate, seen = None, 0.0, set()
    for _round in range(MAX_TIER_ROUNDS):
        streams, choice = {}, {}
        for worker in problem.workers:
            for option in options[worker]:
                fits = (option.node == ps or rate * (streams.get(option.node, 0) + 1)
                        <= problem.aggregators[option.node] * (1 + 1e-9))
                if fits or option is options[worker][-1]:
                    choice[worker] = option
                    if option.node != ps:
                        streams[option.node] = streams.get(option.node, 0) + 1
                    break
        key = tuple(choice[w] for w in problem.workers)
        if key in seen:
            break
        seen.add(key)
        used = {a: aggregate_paths[a][0] for a in sorted(streams)}
        plan = GradientPlan(None, {ps: 1.0}, 0.0, 0.0, 0.0, 0.0, 1.0,
                            {(w, ps): [(o, 1.0)] for w, o in choice.items()},
                            {(a, ps): path for a, path in used.items()})
        rate = min(capacity_of(problem, r) / load
                   for r, load in load_with_returns(problem, plan.loads()).items())
        if best is None or rate > best[0] * (1 + 1e-9):
            best = (rate, {w: [(o, 1.0)] for w, o in choice.items()}, used)
    return best


def plan(problem, policy=GRID, trials=DEFAULT_TRIALS, seed=0, exact_time_s=DEFAULT_TIME_S):
    """The policy's plan for `problem` (see the module doc), as the one-PS case of a
    GradientPlan. GRID also asks the MILP (exact_placement) for the integral optimum
    over its options, for at most exact_time_s (0: not at all)."""
    return _plan(problem, policy, trials, seed, exact_time_s)


def _one_ps_plan(problem, policy, theta_lp, theta_rounded, overload, repaired, theta, legs,
                 used_paths, bound):
    """A GradientPlan from legs by worker and aggregate paths by aggregator."""
    ps = problem.ps
    return GradientPlan(policy, {ps: 1.0}, theta_lp, theta_rounded, overload, repaired, theta,
                        {(w, ps): worker_legs for w, worker_legs in legs.items()},
                        {(a, ps): path for a, path in used_paths.items()}, bound)


def _plan(problem, policy, trials, seed, exact_time_s):
    options, aggregate_paths = options_for(problem, policy)
    if policy in TIERED:
        theta, legs, used_paths = _tiered_plan(problem, options, aggregate_paths)
        return _one_ps_plan(problem, policy, theta, theta, 1.0, theta, theta, legs, used_paths,
                            theta)
    lp = _solve_lp(problem, options, aggregate_paths)
    if policy == NEAREST:   # ATP keeps its split: no rounding, and the LP's rates are feasible
        theta, legs, used_paths = _split(problem, options, aggregate_paths, lp.theta)
        return _one_ps_plan(problem, policy, lp.theta, lp.theta, 1.0, theta, theta, legs,
                            used_paths, lp.theta)
    repaired, theta_rounded, overload, assignment = _best_rounding(
        problem, policy, options, lp, trials, seed)
    bound = lp.theta
    if policy == GRID:
        assignment, bound = with_exact(problem, options, lp.aggregate_paths,
                                       {w: 1.0 for w in problem.workers}, _aggregate_at(problem),
                                       assignment, bound, exact_time_s)
        repaired = assignment.theta()
    used_paths = assignment.used_aggregate_paths()
    theta, legs = repaired, {w: [(o, 1.0)] for w, o in assignment.choice.items()}
    if policy == GRID:
        # spare capacity may carry part of a gradient unaggregated (as ATP does) ...
        spill = {w: [o] + ([default_route(problem, w)] if o.node != problem.ps else [])
                 for w, o in assignment.choice.items()}
        theta, legs, used_paths = _split(problem, spill, {a: [q] for a, q in used_paths.items()},
                                         repaired)
    result = _one_ps_plan(problem, policy, lp.theta, theta_rounded, overload, repaired, theta,
                          legs, used_paths, bound)
    if policy == GRID:
        # ... and the default-route plan, which GRID's options include, may still be better
        nearest = _plan(problem, NEAREST, 1, seed, 0)
        if nearest.f > result.f * (1 + 1e-9):
            result = replace(result, f=nearest.f, legs=nearest.legs,
                             aggregate_paths=nearest.aggregate_paths)
    return result


def _best_rounding(problem, policy, options, lp, trials, seed):
    """(theta, theta_rounded, rounded_overload, StreamAssignment) of the best of `trials`
    seeded roundings of the LP (GRID and no-ina; one for the others), each repaired by
    moves among the options the LP uses and each worker's default route."""
    rng = random_module.Random(seed)
    supported = {w: [o for o in options[w]
                     if lp.rates[w][o] > TOLERANCE or o == default_route(problem, w)]
                 for w in problem.workers}
    best = None
    for _trial in range(max(1, trials) if policy in (GRID, NO_INA) else 1):
        choice, paths = _round(problem, lp, rng)
        theta_rounded, overload = _rounded_rates(problem, lp, choice, paths)
        assignment = StreamAssignment(problem, supported, lp.aggregate_paths, choice, paths,
                                      {w: 1.0 for w in problem.workers}, _aggregate_at(problem),
                                      group_options=options)
        assignment.improve()
        if best is None or assignment.theta() > best[0] + TOLERANCE:
            best = (assignment.theta(), theta_rounded, overload, assignment)
        if best[0] >= lp.theta - TOLERANCE:   # at the LP's bound: no trial can do better
            break
    return best


def _aggregate_at(problem):
    """GRID's aggregate_of: a worker's stream joins the aggregate of its aggregator."""
    return lambda _worker, option: None if option.node == problem.ps else option.node


def _split(problem, options, aggregate_paths, at_least):
    """theta, legs and aggregate paths of the LP over these few options per worker (one
    aggregate path each): the best theta (never below at_least, which these options are
    known to reach), then as much aggregation as that theta allows."""
    theta = max(_solve_lp(problem, options, aggregate_paths).theta, at_least)
    lp = _solve_lp(problem, options, aggregate_paths, min_theta=theta * (1 - 1e-9))
    legs = {w: [(o, r / lp.worker_rate[w]) for o, r in lp.rates[w].items() if r > TOLERANCE]
            for w in problem.workers}
    used = {o.node for w in legs for o, _share in legs[w]} - {problem.ps}
    return theta, legs, {a: aggregate_paths[a][0] for a in sorted(used)}


@dataclass
class _LpSolution:
    theta: float
    rates: dict             # worker -> {Option: r}
    worker_rate: dict       # worker -> sum of its r
    aggregate_rates: dict   # aggregator -> {path: y}
    aggregate_paths: dict   # aggregator -> candidate paths


def _solve_lp(problem, options, aggregate_paths, min_theta=None):
    """The placement LP (gradient_plan) for one PS, by worker and by aggregator."""
    ps = problem.ps
    lp = solve_placement_lp(problem.graph, problem.aggregators, {ps: 1.0},
                            {(w, ps): options[w] for w in problem.workers},
                            {(a, ps): paths for a, paths in aggregate_paths.items()}, min_theta,
                            problem.returns)
    rates = {w: lp.rates[w, ps] for w in problem.workers}
    return _LpSolution(theta=lp.f, rates=rates,
                       worker_rate={w: sum(rates[w].values()) for w in problem.workers},
                       aggregate_rates={a: lp.aggregate_rates[a, ps] for a in aggregate_paths},
                       aggregate_paths=aggregate_paths)


def _round(problem, lp, rng):
    choice = {w: pick(rng, lp.rates[w]) for w in problem.workers}
    paths = {a: pick(rng, lp.aggregate_rates[a]) for a in lp.aggregate_paths}
    return choice, paths


def _rounded_rates(problem, lp, choice, paths):
    """theta and the worst load/capacity when every worker sends at its LP rate on its
    one chosen option and every aggregate at the largest rate among its workers."""
    ps = problem.ps
    used = {o.node for o in choice.values()} - {ps}
    rounded = GradientPlan(None, {ps: 1.0}, 0.0, 0.0, 0.0, 0.0, 1.0,
                           {(w, ps): [(o, lp.worker_rate[w])] for w, o in choice.items()},
                           {(a, ps): paths[a] for a in used})
    overload = max((value / capacity_of(problem, resource)
                    for resource, value in rounded.loads().items()), default=0.0)
    return min(lp.worker_rate.values()), overload
