"""InArt (Liu, ..., Fang et al., WWW 2024): the model split among several PSs
(model_split, phase 1: an LP in the rates the PSs take in, the most even of its optima),
and for each (worker, PS) fragment where it is aggregated and along which paths (plan,
phase 2: GRID's model with a stream per fragment, rounded and repaired), so that the
common sending rate f is largest. Baselines: equal-split, lbmm, atp.
docs/inart-model.md has the LPs and the rounding.
"""

import random as random_module
from dataclasses import dataclass, replace

from syncfabric.decisions.exact_placement import DEFAULT_TIME_S
from syncfabric.decisions.gradient_plan import (GradientPlan, PlacementError, aggregate_of,
                                                solve_placement_lp)
from syncfabric.decisions.ina_problem import (GRID, NEAREST, NO_INA, TOLERANCE, InaProblem,
                                              capacity_of, default_route, options_for)
from syncfabric.decisions.sparse_lp import LpError, SparseLp
from syncfabric.decisions.stream_assignment import StreamAssignment, pick, with_exact

INART, EQUAL_SPLIT, LBMM, ATP = "inart", "equal-split", "lbmm", "atp"
POLICIES = (INART, EQUAL_SPLIT, LBMM, ATP)
OPTIONS_OF = {INART: GRID, EQUAL_SPLIT: GRID, LBMM: NO_INA, ATP: NEAREST}
DEFAULT_TRIALS = 8


class InartProblem:
    """graph: directed, `capacity_mbps` on every edge (what is free for this job);
    pss: the PS hosts; aggregators: {aggregator host: processing capacity C_a}. A PS
    may also be a worker (co-located): its own fragment stays in its host, so there
    is no fragment (s, s) to place. returns: {directed link: R_e} of the return trees
    (InaProblem)."""

    def __init__(self, graph, workers, pss, aggregators, max_paths=4, max_aggregators=8,
                 returns=None):
        if not pss:
            raise PlacementError("a job needs at least one PS")
        nodes = [*dict.fromkeys([*workers, *pss]), *aggregators]
        if len(set(nodes)) != len(nodes) or len(set(workers)) != len(workers) \
                or len(set(pss)) != len(pss):
            raise PlacementError("workers, PSs and aggregators must be distinct nodes (a PS "
                                 "may also be a worker)")
        self.graph, self.workers, self.pss = graph, list(workers), list(pss)
        self.aggregators, self.returns = dict(aggregators), dict(returns or {})
        paths, distances = {}, {}   # shared: a path to an aggregator serves every PS
        self.per_ps = {s: InaProblem(graph, [w for w in self.workers if w != s], s,
                                     self.aggregators, max_paths, max_aggregators, paths,
                                     distances) for s in self.pss}
        self.fragments = [(w, s) for w in self.workers for s in self.pss if w != s]

    def ingress(self, ps):
        return sum(self.graph.edges[edge]["capacity_mbps"] for edge in self.graph.in_edges(ps))


@dataclass(frozen=True)
class Split:
    shares: dict       # PS -> x_s, summing to 1
    rate: float        # f of the relaxed problem
    solution: dict     # the relaxed problem's variables: ("g", s), ("h", w, s, a), ("u", w, s), ("z", a, s)


def model_split(problem):
    """Phase 1: the shares x_s of the relaxed problem (module doc)."""
    lp = SparseLp()
    aggregator_terms = {a: [] for a in problem.aggregators}
    ps_terms = {s: [] for s in problem.pss}
    for s in problem.pss:
        lp.variable(("g", s))
    for w, s in problem.fragments:
        candidates = problem.per_ps[s].candidate_aggregators(w) if problem.aggregators else []
        lp.at_most([(("g", s), 1.0), (("u", w, s), -1.0)]
                   + [(("h", w, s, a), -1.0) for a in candidates], 0.0)
        ps_terms[s].append(("u", w, s))
        for a in candidates:
            lp.at_most([(("h", w, s, a), 1.0), (("z", a, s), -1.0)], 0.0)
            aggregator_terms[a].append(("h", w, s, a))
            if ("z", a, s) not in ps_terms[s]:
                ps_terms[s].append(("z", a, s))
    for a, terms in aggregator_terms.items():
        if terms:
            lp.at_most([(key, 1.0) for key in terms], problem.aggregators[a])
    for s, terms in ps_terms.items():
        lp.at_most([(key, 1.0) for key in terms], problem.ingress(s))
    try:
        x = lp.maximize({("g", s): 1.0 for s in problem.pss})
        rate = sum(x["g", s] for s in problem.pss)
        if rate <= TOLERANCE:
            raise PlacementError("the PSs can take in nothing")
        # among the splits that reach it, the most even (the optimum is rarely unique)
        lp.at_most([(("g", s), -1.0) for s in problem.pss], -rate * (1 - 1e-9))
        for s in problem.pss:
            lp.at_most([("smallest", 1.0), (("g", s), -1.0)], 0.0)
        x = lp.maximize({"smallest": 1.0})
    except LpError as error:
        raise PlacementError("the split LP failed: %s" % error) from None
    total = sum(x["g", s] for s in problem.pss)
    return Split({s: x["g", s] / total for s in problem.pss}, rate, x)


def equal_split(problem):
    return {s: 1.0 / len(problem.pss) for s in problem.pss}


def plan(problem, policy=INART, split=None, trials=DEFAULT_TRIALS, seed=0,
         exact_time_s=DEFAULT_TIME_S, lp_split=False):
    """The policy's plan (module doc); split overrides inart's phase 1 (it is slow to
    change: the PSs hold their shares). Without one, inart plans phase 2 for phase 1's
    split and for the equal split and keeps the faster (phase 1 relaxes the binaries and
    leaves links out, so its split is a guide: on a k = 6 fat-tree with 50 workers and 4
    PSs the equal split's plan was 31% faster). inart also asks the MILP
    (exact_placement) for the integral optimum over its options, within exact_time_s in
    all (0: not at all). lp_split: the plan may also split fragments as the LP does
    (_lp_routes; the round planner's choice, where one option per fragment lost 8-10%
    of the LP's rate), and is that split outright where it reaches the LP's rate and its
    aggregates nest (GradientPlan.aggregates_nest); the papers' policies keep one option
    per fragment, but for the spill."""
    if policy not in POLICIES:
        raise PlacementError("policy must be one of %s, got %r" % (", ".join(POLICIES), policy))
    if policy == INART and split is None:
        splits = [model_split(problem).shares, equal_split(problem)]
        if all(abs(splits[0][s] - splits[1][s]) <= TOLERANCE for s in problem.pss):
            splits.pop()
        return max((_phase2(problem, INART, s, trials, seed, exact_time_s / len(splits),
                            lp_split) for s in splits),
                   key=lambda result: result.f)   # a tie keeps phase 1's
    return _phase2(problem, policy, split if policy == INART else equal_split(problem), trials,
                   seed, exact_time_s, lp_split)


def _phase2(problem, policy, split, trials, seed, exact_time_s, lp_split):
    """Phase 2 (or a baseline) for a fixed split."""
    if policy == ATP:
        return _fluid_plan(problem, split, ATP)
    options, aggregate_paths = _options(problem, OPTIONS_OF[policy])
    lp = solve_placement_lp(problem.graph, problem.aggregators, split, options, aggregate_paths,
                            returns=problem.returns)
    f_lp, rates, aggregate_rates = lp.f, lp.rates, lp.aggregate_rates
    as_lp = _fluid_plan(problem, split, policy, *_lp_routes(lp)) if lp_split else None
    if as_lp is not None and as_lp.f >= f_lp * (1 - 1e-9) and as_lp.aggregates_nest():
        return replace(as_lp, f_lp=f_lp, f_bound=f_lp)
    rng = random_module.Random(seed)
    weight = {k: split[k[1]] for k in problem.fragments}
    # repair moves among the options the LP uses, and each fragment's default route
    supported = {(w, s): [o for o in options[w, s] if rates[w, s][o] > TOLERANCE
                          or o == default_route(problem.per_ps[s], w)]
                 for w, s in problem.fragments}
    best = None
    for _trial in range(max(1, trials)):
        choice = {k: _round_fragment(rng, rates[k]) for k in problem.fragments}
        paths = {key: pick(rng, aggregate_rates[key]) for key in aggregate_paths}
        rounded = GradientPlan(policy, split, f_lp, f_lp, 0.0, f_lp, f_lp,
                               {k: [(o, 1.0)] for k, o in choice.items()}, paths)
        overload = max((value / capacity_of(problem, resource)
                        for resource, value in rounded.loads().items()), default=0.0)
        assignment = StreamAssignment(problem, supported, aggregate_paths, choice, paths, weight,
                                      aggregate_of, group_options=options)
        assignment.improve()
        if best is None or assignment.theta() > best[0] + TOLERANCE:
            best = (assignment.theta(), overload, assignment)
        if best[0] >= f_lp - TOLERANCE:   # at the LP's bound: no trial can do better
            break
    _theta, overload, assignment = best
    # every policy's split gets the same repair (group moves); only inart asks the MILP
    assignment, bound = with_exact(problem, options, aggregate_paths, weight, aggregate_of,
                                   assignment, f_lp, exact_time_s if policy == INART else 0)
    f_repaired = assignment.theta()
    result = GradientPlan(policy, split, f_lp, f_lp / max(overload, 1.0), overload, f_repaired,
                          f_repaired, {k: [(o, 1.0)] for k, o in assignment.choice.items()},
                          assignment.used_aggregate_paths(), bound)
    if policy == LBMM or result.f >= f_lp - TOLERANCE:   # nothing betters a plan at the LP's bound
        return result
    # spare capacity may carry part of a fragment unaggregated on its default route (as
    # ATP does), and the default-route plan, which is within our options, may be better
    spill = {(w, s): [o] + ([default_route(problem.per_ps[s], w)] if o.node != s else [])
             for (w, s), o in assignment.choice.items()}
    candidates = [_fluid_plan(problem, split, policy, spill,
                              {a: [q] for a, q in result.aggregate_paths.items()}),
                  _fluid_plan(problem, split, policy)]
    if as_lp is not None:
        candidates.append(as_lp)
    for candidate in candidates:   # a split whose aggregates do not nest carries more
        if candidate.f > result.f * (1 + 1e-9) and candidate.aggregates_nest():
            result.f, result.legs = candidate.f, candidate.legs
            result.aggregate_paths = candidate.aggregate_paths
    return result


def fragment_options(problem, policy):
    """{fragment: [Option]} and {(aggregator, PS): [paths]} that `policy`'s phase 2 chooses
    among (what its integral optimum is over)."""
    return _options(problem, OPTIONS_OF[policy])


def _options(problem, kind):
    """{fragment: [Option]} and {(aggregator, PS): [paths]} of GRID's option kind per PS."""
    options, aggregate_paths = {}, {}
    for s in problem.pss:
        per_worker, per_aggregator = options_for(problem.per_ps[s], kind)
        options.update({(w, s): per_worker[w] for w in problem.per_ps[s].workers})
        aggregate_paths.update({(a, s): paths for a, paths in per_aggregator.items()})
    return options, aggregate_paths


def _fluid_plan(problem, split, policy, options=None, aggregate_paths=None):
    """The LP's own plan over few options per fragment (by default ATP's: the first
    aggregator on the default route, and the default route): fragments split over
    their options as the LP says, one path per aggregate."""
    if options is None:
        options, aggregate_paths = _options(problem, NEAREST)
    lp = solve_placement_lp(problem.graph, problem.aggregators, split, options, aggregate_paths,
                            returns=problem.returns)
    f, rates = lp.f, lp.rates
    legs = {k: [(o, r / sum(rates[k].values())) for o, r in rates[k].items() if r > TOLERANCE]
            for k in problem.fragments}
    used = {aggregate_of(k, o) for k in legs for o, _share in legs[k]} - {None}
    return GradientPlan(policy, split, f, f, 1.0, f, f, legs,
                     {key: aggregate_paths[key][0] for key in sorted(used)})


def _lp_routes(lp):
    """The LP's own choices with one path per (fragment, node) and per aggregate, each
    the path it sends the most on (a switch forwards a source's datagrams to one
    destination one way): options and aggregate paths for _fluid_plan, which keeps the
    LP's split of each fragment over aggregators and its shard."""
    options = {}
    for key, rates in lp.rates.items():
        by_node = {}
        for option, rate in sorted(rates.items(), key=lambda item: -item[1]):
            if rate > TOLERANCE or not by_node:
                by_node.setdefault(option.node, option)
        options[key] = list(by_node.values())
    used = {aggregate_of(k, o) for k, choices in options.items() for o in choices} - {None}
    paths = {a: [max(lp.aggregate_rates[a], key=lp.aggregate_rates[a].get)] for a in sorted(used)}
    return options, paths


def _round_fragment(rng, rates):
    """R-InArt: a location by its LP rate (summed over paths), then a path there."""
    by_node = {}
    for option, rate in rates.items():
        by_node[option.node] = by_node.get(option.node, 0.0) + rate
    node = pick(rng, by_node)
    return pick(rng, {o: r for o, r in rates.items() if o.node == node})
