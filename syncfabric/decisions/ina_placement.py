"""GRID (Fang et al., IEEE/ACM ToN 2023): where each worker's gradient is aggregated,
and along which path, so that the minimum worker sending rate theta is largest.

Aggregation happens on aggregator hosts attached to programmable switches (an
OpenFlow switch cannot add). A worker's gradient stream either goes to one
aggregator, which sums the streams of its workers and sends one aggregate on
to the PS, or straight to the PS. Every stream of a round runs at the same
rate, so an aggregate runs at the rate of its inputs.

The model (paper's LP with the link constraints it leaves out): for worker n
and each of its options o (one of its `max_aggregators` candidate aggregators,
those least off its way to the PS, or the PS itself, reached by one of at
most `max_paths` candidate paths), a rate r[n, o]; for each aggregator a and
each candidate path q from a to the PS, an aggregate rate y[a, q]. Bounding
the candidates keeps the LP small enough for 100 workers on a 64x64 fabric.

    maximize theta
    theta <= sum_o r[n, o]                       every worker n
    r[n, o] <= sum_q y[a, q]                     every option o at aggregator a
    sum_(n, o at a) r[n, o] <= C_a               every aggregator a (processing capacity)
    sum of the r and y whose paths use e <= c_e  every directed link e, host links
                                                 included (the PS's link is its ingress T)

The LP relaxation is solved with scipy's HiGHS. R-GRIA rounding: each worker
keeps one option, option o with probability r[n, o] / sum_o r[n, o], and each
aggregator one path q with probability y[a, q] / sum_q y[a, q]; the rounded
plan sends at the LP rates and may overload a resource (`rounded_overload`).
Repair then gives every stream the rate the resources allow (capacity over
the number of streams on each), and moves single workers or aggregate paths
while that raises theta. Rounding runs `trials` times (seeded); the best
repaired plan wins. A last LP over each worker's chosen option plus its
default route to the PS lets spare capacity carry part of a gradient
unaggregated, as ATP does; and since GRID's options include the default-route
plan (`nearest`), GRID returns that plan when it is better. The relaxation
lets a worker split into many small streams whose aggregates are cheap, so
theta_lp is an upper bound, not a promise.

Baselines, on the same model:
- `no-ina` (Geryon-like): every worker to the PS, load-balanced over the
  candidate paths (LP, rounding, repair).
- `nearest` (ATP-like): the worker's default route (first candidate path to
  the PS); the first aggregator on it aggregates what its capacity allows and
  the rest of the gradient goes on to the PS unaggregated along the same
  route (the LP's split is kept: a worker sends that share of its fragments
  to the aggregator).
- `switchml` (SwitchML-like): all of a worker's gradient is aggregated at the
  aggregator of its own switch (ToR), on default routes; workers whose ToR
  has none send to the PS.

Paths are node tuples from the worker (or aggregator) host to the aggregator
(or PS) host: the shortest ones, each (source, target) pair starting at its
own rotation (a stable hash) so that pairs spread over spines as ECMP would,
then paths one hop longer when the shortest are fewer than max_paths (the
worked example's detour s1-s2-s3). Rates are in the graph's units (Mbit/s).
"""

import itertools
import random as random_module
import zlib
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from syncfabric.decisions.exact_placement import DEFAULT_TIME_S, exact_assignment
from syncfabric.decisions.gradient_plan import (GradientPlan, Option, PlacementError, edges_of,
                                solve_placement_lp)

GRID, NO_INA, NEAREST, SWITCHML = "grid", "no-ina", "nearest", "switchml"
# the baselines as the GRID authors' code runs them (Fangjin98/randomized-rounding):
# ATP's tiers (the worker's ToR, else the PS's ToR, else the PS) and SwitchML's nearest
# programmable switch, each worker whole (integral)
ATP_TIERED, SWITCHML_NEAREST = "atp-tiered", "switchml-nearest"
TIERED = (ATP_TIERED, SWITCHML_NEAREST)
DEFAULT_POLICIES = (GRID, NO_INA, NEAREST, SWITCHML)   # GRID and the baselines as we model them
POLICIES = DEFAULT_POLICIES + TIERED
MAX_TIER_ROUNDS = 20
DEFAULT_MAX_PATHS = 4
DEFAULT_MAX_AGGREGATORS = 8
DEFAULT_TRIALS = 8
TOLERANCE = 1e-9


@dataclass
class InaProblem:
    """graph: directed, `capacity_mbps` > 0 on every edge (what is available to this
    job); aggregators: {aggregator host: processing capacity C_a > 0}."""
    graph: nx.DiGraph
    workers: list
    ps: str
    aggregators: dict
    max_paths: int = DEFAULT_MAX_PATHS
    max_aggregators: int = DEFAULT_MAX_AGGREGATORS
    _paths: dict = field(default_factory=dict, repr=False)
    _distances: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        nodes = [*self.workers, self.ps, *self.aggregators]
        unknown = [n for n in nodes if n not in self.graph]
        if unknown:
            raise PlacementError("unknown node(s): %s" % ", ".join(map(str, unknown)))
        if len(set(nodes)) != len(nodes):
            raise PlacementError("workers, PS and aggregators must be distinct nodes")
        if not self.workers:
            raise PlacementError("a job needs at least one worker")
        for aggregator, capacity in self.aggregators.items():
            if not capacity > 0:
                raise PlacementError("aggregator %s has no capacity (%r)" % (aggregator, capacity))

    def paths(self, source, target):
        """At most max_paths candidate paths source -> target (cached; see module doc)."""
        key = (source, target)
        if key not in self._paths:
            self._paths[key] = candidate_paths(self.graph, source, target, self.max_paths,
                                               self._distances_to(target))
        return self._paths[key]

    def hops(self, source, target):
        return self._distances_to(target)[source]

    def _distances_to(self, target):
        if target not in self._distances:   # one BFS per target serves every source
            self._distances[target] = nx.single_source_shortest_path_length(
                self.graph.reverse(copy=False), target)
        return self._distances[target]

    def candidate_aggregators(self, worker):
        """The max_aggregators aggregators least off the worker's way to the PS (detour
        in hops, then distance from the worker, then a rotation per worker)."""
        direct = self.hops(worker, self.ps)
        rotation = zlib.crc32(worker.encode())

        def rank(item):
            position, aggregator = item
            to_aggregator = self.hops(worker, aggregator)
            detour = to_aggregator + self.hops(aggregator, self.ps) - direct
            return detour, to_aggregator, (position + rotation) % len(self.aggregators)

        ranked = sorted(enumerate(sorted(self.aggregators)), key=rank)
        return [aggregator for _position, aggregator in ranked[:self.max_aggregators]]

    def switch_of(self, host):
        (switch,) = self.graph.successors(host)
        return switch


def candidate_paths(graph, source, target, max_paths, distances=None):
    """At most max_paths paths source -> target: shortest ones first, then (if fewer)
    paths one hop longer (one sideways step). Where paths branch, the successors are
    taken in a rotation that depends on the pair, so pairs spread over equal paths as
    ECMP spreads flows. distances: hop counts to `target` (computed if not given)."""
    if distances is None:
        distances = nx.single_source_shortest_path_length(graph.reverse(copy=False), target)
    if source not in distances:
        raise PlacementError("no path from %s to %s" % (source, target))
    rotation = zlib.crc32(("%s>%s" % (source, target)).encode())
    chosen = list(itertools.islice(_descents(graph, distances, source, 0, rotation), max_paths))
    if len(chosen) < max_paths:
        chosen += itertools.islice(_descents(graph, distances, source, 1, rotation),
                                   max_paths - len(chosen))
    return chosen


def _descents(graph, distances, node, sideways, rotation):
    """Paths from `node` to distance 0 that take exactly `sideways` steps to a node no
    closer (such paths are simple: after a sideways step they only descend)."""
    here = distances[node]
    if here == 0:
        if sideways == 0:
            yield (node,)
        return
    successors = sorted(graph.successors(node))
    start = rotation % len(successors)
    for successor in successors[start:] + successors[:start]:
        there = distances.get(successor)
        if there == here - 1:
            rests = _descents(graph, distances, successor, sideways, rotation)
        elif there == here and sideways > 0:
            rests = _descents(graph, distances, successor, sideways - 1, rotation)
        else:
            continue
        for rest in rests:
            yield (node,) + rest


def options_for(problem, policy):
    """{worker: [Option]} that `policy` may choose from, and {aggregator: [paths]}."""
    ps = problem.ps
    if policy == GRID:
        options = {w: [Option(a, p) for a in problem.candidate_aggregators(w)
                       for p in problem.paths(w, a)]
                   + [Option(ps, p) for p in problem.paths(w, ps)] for w in problem.workers}
        used = sorted({o.node for os in options.values() for o in os} - {ps})
        return options, {a: problem.paths(a, ps) for a in used}
    if policy == NO_INA:
        return {w: [Option(ps, p) for p in problem.paths(w, ps)] for w in problem.workers}, {}
    if policy in (NEAREST, SWITCHML):
        by_switch = {problem.switch_of(a): a for a in sorted(problem.aggregators, reverse=True)}
        options, aggregate_paths = {}, {}
        for worker in problem.workers:
            route = problem.paths(worker, ps)[0]
            on_route = route[1:2] if policy == SWITCHML else route[1:-1]
            aggregator = next((by_switch[s] for s in on_route if s in by_switch), None)
            if aggregator is None:
                options[worker] = [Option(ps, route)]
                continue
            at = route.index(problem.switch_of(aggregator))
            options[worker] = [Option(aggregator, route[:at + 1] + (aggregator,))]
            if policy == NEAREST:
                options[worker].append(Option(ps, route))
            aggregate_paths.setdefault(aggregator, [(aggregator,) + route[at:]])
        return options, aggregate_paths
    if policy in TIERED:
        return _tier_options(problem, policy)
    raise PlacementError("policy must be one of %s, got %r" % (", ".join(POLICIES), policy))


def _tier_options(problem, policy):
    """Each worker's options in the order the authors' baseline tries them, and one
    path per aggregator: atp-tiered the aggregator of the worker's ToR, then that of
    the PS's ToR (on the default route), then the PS; switchml-nearest the aggregator
    fewest hops away (anywhere), or the PS if there is none."""
    ps = problem.ps
    by_switch = {problem.switch_of(a): a for a in sorted(problem.aggregators, reverse=True)}
    options, aggregate_paths = {}, {}
    for worker in problem.workers:
        route = problem.paths(worker, ps)[0]
        tiers = []
        if policy == ATP_TIERED:
            for switch in dict.fromkeys([route[1], route[-2]]):   # the ToRs of worker and PS
                if switch in by_switch:
                    aggregator = by_switch[switch]
                    at = route.index(switch)
                    tiers.append(Option(aggregator, route[:at + 1] + (aggregator,)))
                    aggregate_paths.setdefault(aggregator, [(aggregator,) + route[at:]])
        elif problem.aggregators:
            aggregator = min(sorted(problem.aggregators), key=lambda a: problem.hops(worker, a))
            tiers.append(Option(aggregator, problem.paths(worker, aggregator)[0]))
            aggregate_paths.setdefault(aggregator, [problem.paths(aggregator, ps)[0]])
        options[worker] = tiers + ([Option(ps, route)] if policy == ATP_TIERED or not tiers else [])
    return options, aggregate_paths


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
        rate = min(capacity_of(problem, r) / load for r, load in plan.loads().items())
        if best is None or rate > best[0] * (1 + 1e-9):
            best = (rate, {w: [(o, 1.0)] for w, o in choice.items()}, used)
    return best


def fragment_options(problem, policy):
    """options_for keyed as a GradientPlan is: {(worker, PS): [Option]} and
    {(aggregator, PS): [paths]} (what policy's integral optimum is over)."""
    options, aggregate_paths = options_for(problem, policy)
    ps = problem.ps
    return ({(w, ps): choices for w, choices in options.items()},
            {(a, ps): paths for a, paths in aggregate_paths.items()})


def plan(problem, policy=GRID, trials=DEFAULT_TRIALS, seed=0, exact_time_s=DEFAULT_TIME_S):
    """The policy's plan for `problem` (see the module doc), as the one-PS case of a
    GradientPlan. GRID also asks the MILP (exact_placement) for the integral optimum
    over its options, for at most exact_time_s (0: not at all)."""
    theta_lp, theta_rounded, overload, repaired, theta, legs, used_paths, bound = _plan(
        problem, policy, trials, seed, exact_time_s)
    ps = problem.ps
    return GradientPlan(policy, {ps: 1.0}, theta_lp, theta_rounded, overload, repaired, theta,
                        {(w, ps): worker_legs for w, worker_legs in legs.items()},
                        {(a, ps): path for a, path in used_paths.items()}, bound)


def _plan(problem, policy, trials, seed, exact_time_s):
    """(theta_lp, theta_rounded, rounded_overload, theta_repaired, theta, legs by worker,
    aggregate path by aggregator, the bound on integral plans)."""
    options, aggregate_paths = options_for(problem, policy)
    if policy in TIERED:
        theta, legs, used_paths = _tiered_plan(problem, options, aggregate_paths)
        return theta, theta, 1.0, theta, theta, legs, used_paths, theta
    lp = _solve_lp(problem, options, aggregate_paths)
    if policy == NEAREST:   # ATP keeps its split: no rounding, and the LP's rates are feasible
        theta, legs, used_paths = _split(problem, options, aggregate_paths, lp.theta)
        return lp.theta, lp.theta, 1.0, theta, theta, legs, used_paths, lp.theta
    rng = random_module.Random(seed)
    # repair moves among the options the LP uses, and each worker's default route
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
    repaired, theta_rounded, overload, assignment = best
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
        # ... and the default-route plan, which GRID's options include, may still be better
        nearest = _plan(problem, NEAREST, 1, seed, 0)
        if nearest[4] > theta * (1 + 1e-9):
            theta, legs, used_paths = nearest[4:7]
    return lp.theta, theta_rounded, overload, repaired, theta, legs, used_paths, bound


def with_exact(problem, options, aggregate_paths, weight, aggregate_of, assignment, bound,
               time_s):
    """The repaired assignment, or the MILP's (exact_placement, within time_s; 0: no MILP)
    where that is better, and the bound on integral plans over these options tightened by
    the MILP's. Unless the MILP proved its answer optimal, group moves then try to better
    it (StreamAssignment.improve_groups)."""
    exact = None if time_s <= 0 else exact_assignment(
        options, aggregate_paths, weight, aggregate_of,
        lambda resource: capacity_of(problem, resource), time_s)
    if exact is not None:
        if exact.f_bound is not None:
            bound = min(bound, exact.f_bound)
        if exact.f > assignment.theta() * (1 + 1e-9):
            paths = {a: exact.paths.get(a, qs[0]) for a, qs in aggregate_paths.items()}
            assignment = StreamAssignment(problem, options, aggregate_paths, exact.choice, paths,
                                          weight, aggregate_of)
            assignment.improve()
        if exact.optimal:
            return assignment, bound
    assignment.improve_groups()
    return assignment, bound


def _aggregate_at(problem):
    """GRID's aggregate_of: a worker's stream joins the aggregate of its aggregator."""
    return lambda _worker, option: None if option.node == problem.ps else option.node


def default_route(problem, worker):
    return Option(problem.ps, problem.paths(worker, problem.ps)[0])


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
                            {(a, ps): paths for a, paths in aggregate_paths.items()}, min_theta)
    rates = {w: lp.rates[w, ps] for w in problem.workers}
    return _LpSolution(theta=lp.f, rates=rates,
                       worker_rate={w: sum(rates[w].values()) for w in problem.workers},
                       aggregate_rates={a: lp.aggregate_rates[a, ps] for a in aggregate_paths},
                       aggregate_paths=aggregate_paths)


def pick(rng, weights):
    """A key of `weights` with probability proportional to its weight (the first if all 0)."""
    keys = list(weights)
    total = sum(max(v, 0.0) for v in weights.values())
    if total <= TOLERANCE:
        return keys[0]
    return rng.choices(keys, weights=[max(weights[k], 0.0) for k in keys])[0]


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


def capacity_of(problem, resource):
    """An aggregator's processing capacity, or a directed link's capacity."""
    if isinstance(resource, tuple):
        return problem.graph.edges[resource]["capacity_mbps"]
    return problem.aggregators[resource]


class StreamAssignment:
    """One option per stream and one path per aggregate in use; stream k sends at
    weight[k] * theta, an aggregate at the weight of its streams, and theta = min over
    resources of capacity / (weights on it). GRID: a stream per worker, weight 1, an
    aggregate per aggregator; InArt: a stream per (worker, PS), weight x_PS, an
    aggregate per (aggregator, PS). aggregate_of(key, option) names the aggregate the
    stream joins there, or None if the option goes to the stream's PS.

    improve() is a local search over single moves (a worker to another of its
    candidate options, an aggregate to another path), scored by theta, then by
    fewer resources at theta (so that a move that frees one of two bottlenecks
    counts). A move changes few resources, so a candidate is scored from those
    and the smallest ratios of the rest. improve_groups() then tries group moves over
    group_options (default: options; the planners give every option, also those the LP
    left at zero): all the streams of the bottleneck to one aggregate, and all the
    members of one aggregate to another (a merge), a whole group at once."""

    SMALLEST = 64
    MAX_GROUP_ROUNDS = 2

    def __init__(self, problem, options, aggregate_paths, choice, paths, weight, aggregate_of,
                 group_options=None):
        self.problem, self.options, self.aggregate_paths = problem, options, aggregate_paths
        self.group_options = group_options or options
        self.choice, self.paths = dict(choice), dict(paths)
        self.weight, self.aggregate_of = weight, aggregate_of
        resources = {e for os in [*self.group_options.values(), *options.values(),
                                  self.choice.values()] for o in os for e in edges_of(o.path)}
        resources |= {e for qs in aggregate_paths.values() for q in qs for e in edges_of(q)}
        self.resources = sorted(resources, key=str) + sorted(problem.aggregators)
        self.position = {r: i for i, r in enumerate(self.resources)}
        self.capacity = np.array([capacity_of(problem, r) for r in self.resources], dtype=float)
        self.load = np.zeros(len(self.resources))
        self.members = {}   # aggregate -> streams in it
        for key, option in self.choice.items():
            self._apply(self._worker_delta(key, option, fresh=True))
            self._join(key, option, +1)

    def _join(self, key, option, change):
        aggregate = self.aggregate_of(key, option)
        if aggregate is not None:
            self.members[aggregate] = self.members.get(aggregate, 0) + change

    def _indices(self, path):
        return [self.position[e] for e in edges_of(path)]

    def _stream(self, key, option):
        indices = self._indices(option.path)
        if self.aggregate_of(key, option) is not None:
            indices.append(self.position[option.node])
        return indices

    def _worker_delta(self, key, option, fresh=False):
        """{resource index: change in weight} if stream `key` moved to `option`."""
        delta = {}
        weight = self.weight[key]
        old = None if fresh else self.choice[key]
        same = old is not None and self.aggregate_of(key, old) == self.aggregate_of(key, option)
        for sign, chosen in ((-1, old), (+1, option)):
            if chosen is None:
                continue
            for i in self._stream(key, chosen):
                delta[i] = delta.get(i, 0) + sign * weight
            aggregate = self.aggregate_of(key, chosen)
            if aggregate is None or same:
                continue
            members = self.members.get(aggregate, 0)
            if (sign < 0 and members == 1) or (sign > 0 and members == 0):
                for i in self._indices(self.paths[aggregate]):   # the aggregate appears or goes
                    delta[i] = delta.get(i, 0) + sign * weight
        return delta

    def _aggregate_delta(self, aggregate, path):
        delta = {}
        weight = self._aggregate_weight(aggregate)
        for sign, chosen in ((-1, self.paths[aggregate]), (+1, path)):
            for i in self._indices(chosen):
                delta[i] = delta.get(i, 0) + sign * weight
        return delta

    def _aggregate_weight(self, aggregate):
        return next(self.weight[k] for k, o in self.choice.items()
                    if self.aggregate_of(k, o) == aggregate)

    def _apply(self, delta):
        for i, change in delta.items():
            self.load[i] += change

    def _ratios(self):
        ratio = np.full(len(self.resources), np.inf)
        used = self.load > 0
        ratio[used] = self.capacity[used] / self.load[used]
        return ratio

    def theta(self):
        ratio = self._ratios()
        return float(ratio.min()) if np.isfinite(ratio).any() else 0.0

    def _score(self, delta, smallest, ratio):
        """(theta, -resources at theta) after applying delta."""
        changed = []
        for i, change in delta.items():
            streams = self.load[i] + change
            changed.append(self.capacity[i] / streams if streams > 0 else np.inf)
        # every resource outside `smallest` has a ratio >= theirs (argpartition)
        others = [ratio[i] for i in smallest if i not in delta]
        values = changed + others
        if not others:   # rare: the move touches every one of the smallest
            values = list(np.delete(ratio, list(delta))) + changed
        theta = min(values)
        return theta, -sum(1 for v in values if v <= theta * (1 + 1e-9))

    def _bottleneck_users(self, ratio):
        """Streams and aggregates that use a resource that sets theta."""
        tight = set(np.flatnonzero(ratio <= ratio.min() * (1 + 1e-9)).tolist())
        streams = []
        for key, option in self.choice.items():
            aggregate = self.aggregate_of(key, option)
            if tight.intersection(self._stream(key, option)) or (
                    aggregate is not None
                    and tight.intersection(self._indices(self.paths[aggregate]))):
                streams.append(key)
        aggregates = [a for a in self.paths if self.members.get(a)
                      and tight.intersection(self._indices(self.paths[a]))]
        return streams, aggregates

    def improve_groups(self):
        """A group move that raises theta, then single moves, while that helps."""
        for _round in range(self.MAX_GROUP_ROUNDS):
            if not self._best_group_move():
                return
            self.improve()

    def _move(self, key, option):
        """Move one stream to `option` now; returns the option it had."""
        old = self.choice[key]
        self._apply(self._worker_delta(key, option))
        self._join(key, old, -1)
        self._join(key, option, +1)
        self.choice[key] = option
        return old

    SMALL_GROUP = 12   # groups this small are also tried without each one of their streams

    def _group_candidates(self):
        """(aggregate, its path, streams) to move there together: the bottleneck's streams
        to each aggregate they can join (and, for a small group, all but one of them), and
        the members of each aggregate in use to each other one; every path of the target."""
        joinable = {}   # aggregate -> streams with an option that joins it
        for key, choices in self.group_options.items():
            for option in choices:
                aggregate = self.aggregate_of(key, option)
                if aggregate is not None:
                    joinable.setdefault(aggregate, set()).add(key)
        streams, _aggregates = self._bottleneck_users(self._ratios())
        groups = []
        for aggregate, keys in joinable.items():
            group = [key for key in streams if key in keys]
            groups.append((aggregate, group))
            if 2 < len(group) <= self.SMALL_GROUP:
                groups += [(aggregate, group[:i] + group[i + 1:]) for i in range(len(group))]
        for source in [a for a in joinable if self.members.get(a)]:
            members = [key for key, option in self.choice.items()
                       if self.aggregate_of(key, option) == source]
            groups += [(target, members) for target, keys in joinable.items()
                       if target != source and keys.issuperset(members)]
        return [(aggregate, path, group) for aggregate, group in groups if group
                for path in self.aggregate_paths[aggregate]]

    def _join_greedily(self, aggregate, path, group):
        """Do the group move: the aggregate on `path`, then each stream to its option that
        joins it with the most headroom left; returns how to undo it."""
        undo = [("path", aggregate, self.paths[aggregate])]
        if path != self.paths[aggregate]:
            if self.members.get(aggregate):
                self._apply(self._aggregate_delta(aggregate, path))
            self.paths[aggregate] = path
        for key in group:
            joins = [o for o in self.group_options[key] if self.aggregate_of(key, o) == aggregate]
            option = min(joins, key=lambda o: max(
                (self.load[i] + self.weight[key]) / self.capacity[i] for i in self._stream(key, o)))
            if option != self.choice[key]:
                undo.append(("stream", key, self._move(key, option)))
        return undo

    def _undo(self, undo):
        for kind, who, what in reversed(undo):
            if kind == "stream":
                self._move(who, what)
            elif what != self.paths[who]:
                if self.members.get(who):
                    self._apply(self._aggregate_delta(who, what))
                self.paths[who] = what

    def _best_group_move(self):
        """Take the group move that raises theta most; False if none does."""
        theta, best = self.theta(), None
        for candidate in self._group_candidates():
            undo = self._join_greedily(*candidate)
            score = self.theta()
            self._undo(undo)
            if score > theta * (1 + 1e-9) + TOLERANCE and (best is None or score > best[0]):
                best = (score, candidate)
        if best is None:
            return False
        self._join_greedily(*best[1])
        return True

    def improve(self):
        """Take the best single move while it raises the score (see the class doc)."""
        while True:
            ratio = self._ratios()
            if not np.isfinite(ratio).any():
                return
            count = min(self.SMALLEST, len(ratio))
            smallest = np.argpartition(ratio, count - 1)[:count].tolist()
            current = self._score({}, smallest, ratio)
            best, move = current, None
            workers, aggregators = self._bottleneck_users(ratio)
            for worker in workers:
                for option in self.options[worker]:
                    if option != self.choice[worker]:
                        score = self._score(self._worker_delta(worker, option), smallest, ratio)
                        if _better(score, best):
                            best, move = score, ("worker", worker, option)
            for aggregator in aggregators:
                for path in self.aggregate_paths[aggregator]:
                    if path != self.paths[aggregator]:
                        score = self._score(self._aggregate_delta(aggregator, path), smallest, ratio)
                        if _better(score, best):
                            best, move = score, ("aggregate", aggregator, path)
            if move is None:
                return
            kind, who, what = move
            if kind == "worker":
                self._move(who, what)
            else:
                self._apply(self._aggregate_delta(who, what))
                self.paths[who] = what

    def used_aggregate_paths(self):
        return {a: self.paths[a] for a in sorted(self.paths) if self.members.get(a)}


def _better(score, best):
    """Higher theta (beyond rounding), or the same theta with fewer resources at it."""
    theta, tight = score
    if theta > best[0] * (1 + 1e-9) + TOLERANCE:
        return True
    return theta >= best[0] * (1 - 1e-9) and tight > best[1]
