"""GRID's problem and its candidates: a job's graph, workers, PS and aggregators, the
few paths and aggregators each worker may use, and the options every policy chooses
from (GRID's, the baselines' and the authors' tiers). GRID and InArt both plan over
them; docs/grid-model.md explains the model."""

import itertools
import zlib
from dataclasses import dataclass, field

import networkx as nx

from syncfabric.decisions.gradient_plan import Option, PlacementError

GRID, NO_INA, NEAREST, SWITCHML = "grid", "no-ina", "nearest", "switchml"


# the baselines as the GRID authors' code runs them (Fangjin98/randomized-rounding):
# ATP's tiers (the worker's ToR, else the PS's ToR, else the PS) and SwitchML's nearest
# programmable switch, each worker whole (integral)
ATP_TIERED, SWITCHML_NEAREST = "atp-tiered", "switchml-nearest"


TIERED = (ATP_TIERED, SWITCHML_NEAREST)
DEFAULT_POLICIES = (GRID, NO_INA, NEAREST, SWITCHML)   # GRID and the baselines as we model them
POLICIES = DEFAULT_POLICIES + TIERED
DEFAULT_MAX_PATHS = 4
DEFAULT_MAX_AGGREGATORS = 8
TOLERANCE = 1e-9


@dataclass
class InaProblem:
    """graph: directed, `capacity_mbps` > 0 on every edge (what is available to this
    job); aggregators: {aggregator host: processing capacity C_a > 0}; returns:
    {directed link: R_e}, what the round's return trees put on it per unit of the
    gradients' rate (gradient_plan), planned together with the gradients."""
    graph: nx.DiGraph
    workers: list
    ps: str
    aggregators: dict
    max_paths: int = DEFAULT_MAX_PATHS
    max_aggregators: int = DEFAULT_MAX_AGGREGATORS
    _paths: dict = field(default_factory=dict, repr=False)
    _distances: dict = field(default_factory=dict, repr=False)
    returns: dict = field(default_factory=dict)

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


def fragment_options(problem, policy):
    """options_for keyed as a GradientPlan is: {(worker, PS): [Option]} and
    {(aggregator, PS): [paths]} (what policy's integral optimum is over)."""
    options, aggregate_paths = options_for(problem, policy)
    ps = problem.ps
    return ({(w, ps): choices for w, choices in options.items()},
            {(a, ps): paths for a, paths in aggregate_paths.items()})


def default_route(problem, worker):
    return Option(problem.ps, problem.paths(worker, problem.ps)[0])


def load_with_returns(problem, load):
    """{resource: load per unit of f}: `load` (of the gradients) and the problem's returns."""
    total = dict(load)
    for edge, weight in problem.returns.items():
        total[edge] = total.get(edge, 0.0) + weight
    return total


def capacity_of(problem, resource):
    """An aggregator's processing capacity, or a directed link's capacity."""
    if isinstance(resource, tuple):
        return problem.graph.edges[resource]["capacity_mbps"]
    return problem.aggregators[resource]
