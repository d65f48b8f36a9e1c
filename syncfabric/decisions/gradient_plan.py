"""The one model of a gradient plan, for one PS (GRID) or several (InArt): a plan, its
streams and loads, and the placement LP both planners solve.

A fragment (w, s) is the share x_s of worker w's gradient that PS s holds (GRID: one PS,
x = 1); every worker sends at f in all, x_s f to PS s. An option (Option of
ina_placement: a node and a path) takes a fragment to an aggregator, which sums the
fragments of its workers for that PS and sends one aggregate on, or to the PS itself.

The placement LP over given options (paths in the graph's units, Mbit/s)::

    maximize f
    x_s f <= sum_o r[w,s,o]                     every fragment
    r[w,s,o at a] <= sum_q y[a,s,q]             an aggregate runs at its fastest input
    sum of the r at a <= C_a                    every aggregator
    sum of the r and y whose paths use e
        + R_e f <= c_e                          every directed link

R_e is what the round's return trees put on e per unit of f (a shard's tree runs at x_s
f, as fast as its sums complete: round_planner), so gradients and returns are rated
together; without returns R_e = 0. Or, with min_f, the most aggregated traffic among
the plans with f >= min_f.
"""

from collections import defaultdict
from dataclasses import dataclass, field, replace

import networkx as nx

from syncfabric.decisions.model_shards import aggregator_offsets, share_spans, spans_nest
from syncfabric.decisions.sparse_lp import LpError, SparseLp

ROOM_TOLERANCE = 1e-6   # of capacity: an LP's rates fill a link up to its solver's tolerance


class PlacementError(ValueError):
    """The job cannot be planned as asked (unknown nodes, no capacity, no path)."""


@dataclass(frozen=True)
class Option:
    """One way a worker's gradient leaves: to `node` (an aggregator or the PS) along `path`."""
    node: str
    path: tuple


def edges_of(path):
    return zip(path, path[1:])


def aggregate_of(fragment, option):
    """The aggregate a fragment joins with this option: (aggregator, its PS), or None if
    the option goes to the fragment's PS."""
    return None if option.node == fragment[1] else (option.node, fragment[1])


@dataclass
class GradientPlan:
    """legs: {(worker, PS): [(Option, share of the fragment)]}; aggregate_paths:
    {(aggregator, PS): path}; split: {PS: x_s}. f_lp: the relaxation's rate; f_rounded
    and rounded_overload: the rounded plan at the LP's rates (the worst load / capacity
    it causes); f_repaired: after repair (and the MILP), one option per fragment; f: the
    plan's; f_bound: what no integral plan over the options beats (the MILP's optimum or
    bound; the LP's rate when there is no better)."""
    policy: str
    split: dict
    f_lp: float
    f_rounded: float
    rounded_overload: float
    f_repaired: float
    f: float
    legs: dict
    aggregate_paths: dict
    f_bound: float = None

    @property
    def optimality_gap(self):
        """How far below the best integral plan over its options this plan may be, as a
        fraction of that bound: 0 where the MILP proved it optimal (a plan that also
        splits fragments may beat every integral one; the gap is then 0 too)."""
        bound = self.f_lp if self.f_bound is None else self.f_bound
        return max(0.0, (bound - self.f) / bound) if bound > 0 else 0.0

    def leg_rates(self):
        """[((worker, PS), Option, Mbit/s)]."""
        return [(key, option, self.f * self.split[key[1]] * share)
                for key in sorted(self.legs) for option, share in self.legs[key]]

    def aggregate_rates(self):
        """{(aggregator, PS): Mbit/s}: an aggregate runs at its fastest input (where its
        workers' fragment ranges nest: aggregates_nest)."""
        rates = {}
        for key, option, rate in self.leg_rates():
            aggregate = aggregate_of(key, option)
            if aggregate is not None:
                rates[aggregate] = max(rates.get(aggregate, 0.0), rate)
        return rates

    def aggregates_nest(self):
        """Whether every aggregator gets nested fragment ranges from its workers, as the
        hosts lay them out (model_shards.share_spans), so that it sends no more than its
        fastest input. Always so with one option per fragment; a fluid split over several
        aggregators of one shard may not be."""
        shares = {key: [(o.node, share) for o, share in legs] for key, legs in self.legs.items()}
        offsets = aggregator_offsets(shares)
        spans = defaultdict(list)
        for (_worker, ps), legs in shares.items():
            for node, start, end in share_spans(legs, ps, offsets):
                if node != ps:
                    spans[node, ps].append((start, end))
        return all(spans_nest(group) for group in spans.values())

    def workers_at(self, aggregate):
        return sorted(w for (w, s), legs in self.legs.items()
                      if any(aggregate_of((w, s), o) == aggregate for o, _share in legs))

    def streams(self):
        """[(source host, destination host, path, Mbit/s, PS)]: every leg, then every
        aggregate, in a stable order: what the network must carry."""
        legs = [(key[0], option.node, option.path, rate, key[1])
                for key, option, rate in self.leg_rates()]
        return legs + [(a, s, self.aggregate_paths[a, s], rate, s)
                       for (a, s), rate in sorted(self.aggregate_rates().items())]

    def loads(self):
        """{directed link or aggregator: Mbit/s} this plan puts on it."""
        load = {}
        for _source, destination, path, rate, _ps in self.streams():
            resources = list(edges_of(path))
            if destination in self.aggregators_used():
                resources.append(destination)
            for resource in resources:
                load[resource] = load.get(resource, 0.0) + rate
        return load

    def aggregators_used(self):
        return {a for a, _s in self.aggregate_paths}

    def with_stream_paths(self, paths):
        """The same plan with its streams (in streams() order) on `paths`: nodes, shares
        and rates unchanged, e.g. moved around a failed link."""
        paths = iter([tuple(path) for path in paths])
        legs = {key: [(Option(option.node, next(paths)), share) for option, share in self.legs[key]]
                for key in sorted(self.legs)}
        aggregate_paths = dict(self.aggregate_paths)
        for aggregate in sorted(self.aggregate_rates()):
            aggregate_paths[aggregate] = next(paths)
        return replace(self, legs=legs, aggregate_paths=aggregate_paths)

    def record(self):
        """The plan as JSON-able data that from_record() takes back (a state file)."""
        return {"policy": self.policy, "split": self.split, "f_lp": self.f_lp,
                "f_rounded": self.f_rounded, "rounded_overload": self.rounded_overload,
                "f_repaired": self.f_repaired, "f": self.f, "f_bound": self.f_bound,
                "legs": [[w, s, [[o.node, list(o.path), share] for o, share in self.legs[w, s]]]
                         for w, s in sorted(self.legs)],
                "aggregate_paths": [[a, s, list(path)]
                                    for (a, s), path in sorted(self.aggregate_paths.items())]}

    @classmethod
    def from_record(cls, record):
        """The plan record() made; KeyError, TypeError or ValueError if it is not one."""
        fields = {k: record[k] for k in ("policy", "split", "f_lp", "f_rounded",
                                         "rounded_overload", "f_repaired", "f", "f_bound")}
        legs = {(w, s): [(Option(node, tuple(path)), float(share)) for node, path, share in options]
                for w, s, options in record["legs"]}
        paths = {(a, s): tuple(path) for a, s, path in record["aggregate_paths"]}
        return cls(legs=legs, aggregate_paths=paths, **fields)


def moved_paths(graph, streams, down_links):
    """Paths for a plan's `streams` (GradientPlan.streams()) that avoid `down_links`
    (frozensets of two nodes) on `graph`, whose capacity_mbps is what the plan may use:
    a stream that crosses no down link keeps its path; each other one, the fastest
    first, takes the fewest-hop path with room left for its rate. PlacementError if
    one finds none (then its nodes or rates must change)."""
    room = {(u, v): data["capacity_mbps"] for u, v, data in graph.edges(data=True)}
    paths = [tuple(stream[2]) for stream in streams]
    broken = []
    for index, (_source, _destination, path, rate, _ps) in enumerate(streams):
        if any(frozenset(edge) in down_links for edge in edges_of(path)):
            broken.append(index)
        else:
            for edge in edges_of(path):
                room[edge] = room.get(edge, 0.0) - rate
    for index in sorted(broken, key=lambda i: -streams[i][3]):
        source, destination, _path, rate, _ps = streams[index]
        usable = nx.subgraph_view(graph, filter_edge=lambda u, v: (
            frozenset((u, v)) not in down_links
            and room[u, v] + ROOM_TOLERANCE * graph.edges[u, v]["capacity_mbps"] >= rate))
        try:
            paths[index] = tuple(nx.shortest_path(usable, source, destination))
        except (nx.NetworkXNoPath, nx.NodeNotFound):
            raise PlacementError("no path from %s to %s with %.3f Mbit/s free avoids the failed "
                                 "link(s)" % (source, destination, rate)) from None
        for edge in edges_of(paths[index]):
            room[edge] -= rate
    return paths


@dataclass
class PlacementLp:
    f: float
    rates: dict             # fragment -> {Option: r}
    aggregate_rates: dict   # (aggregator, PS) -> {path: y}


def solve_placement_lp(graph, aggregators, split, options, aggregate_paths, min_f=None,
                       returns=None):
    """The placement LP (module doc) by HiGHS. options: {fragment: [Option]};
    aggregate_paths: {(aggregator, PS): [paths]}; aggregators: {aggregator: C_a};
    returns: {directed link: R_e}, the return trees' load per unit of f."""
    lp = SparseLp()
    lp.variable("f")
    streams = [("r", key, o) for key in options for o in options[key]]
    aggregates = [("y", a, q) for a in sorted(aggregate_paths) for q in aggregate_paths[a]]
    for variable in streams + aggregates:
        lp.variable(variable)
    for key, choices in options.items():
        lp.at_most([("f", split[key[1]])] + [(("r", key, o), -1.0) for o in choices], 0.0)
    link_terms, aggregator_terms = {}, {a: [] for a in aggregators}
    for stream in streams:
        key, option = stream[1], stream[2]
        for edge in edges_of(option.path):
            link_terms.setdefault(edge, []).append(stream)
        aggregate = aggregate_of(key, option)
        if aggregate is not None:
            aggregator_terms[option.node].append(stream)
            lp.at_most([(stream, 1.0)] + [(("y", aggregate, q), -1.0)
                                          for q in aggregate_paths[aggregate]], 0.0)
    for variable in aggregates:
        for edge in edges_of(variable[2]):
            link_terms.setdefault(edge, []).append(variable)
    for a, terms in aggregator_terms.items():
        if terms:
            lp.at_most([(term, 1.0) for term in terms], aggregators[a])
    returns = returns or {}
    for edge in list(link_terms) + [e for e in returns if e not in link_terms]:
        terms = [(term, 1.0) for term in link_terms.get(edge, [])]
        if returns.get(edge):
            terms.append(("f", returns[edge]))
        lp.at_most(terms, graph.edges[edge]["capacity_mbps"])
    try:
        if min_f is None:
            x = lp.maximize({"f": 1.0})
        else:
            x = lp.maximize({s: 1.0 for s in streams if aggregate_of(s[1], s[2]) is not None},
                            lower={"f": min_f})
    except LpError as error:
        raise PlacementError("the placement LP failed: %s" % error) from None
    return PlacementLp(x["f"], {k: {o: x["r", k, o] for o in options[k]} for k in options},
                       {a: {q: x["y", a, q] for q in paths} for a, paths in aggregate_paths.items()})


@dataclass(frozen=True)
class SteeringShare:
    """One switch's share of an INA plan: flows {(src ip, dst ip, UDP port): (out port,
    index of the stream policed there, or None)} and the rates of the streams that
    start there {stream index: Mbit/s} (the builders name their meters); and its
    admission (plan_admission): the members' datagrams it admits, {(in port, src ip,
    dst ip, UDP port)}, and the destinations it closes to everyone else, {(dst ip,
    UDP port)}."""
    flows: dict = field(default_factory=dict)
    meters: dict = field(default_factory=dict)
    admits: frozenset = frozenset()
    closed: frozenset = frozenset()


NO_SHARE = SteeringShare()


def steering_shares(view, streams, ports, admission=None):
    """{switch: SteeringShare}: every stream (GradientPlan.streams()) gets a flow on each
    switch of its path, matching its source, destination and its PS's UDP port, and is
    held to its rate on its first switch. `admission`: {switch: (admits, closed)} of
    the plan (plan_admission.admission), added to the switches' shares."""
    flows, meters = defaultdict(dict), defaultdict(dict)
    for index, (source, destination, path, rate, ps) in enumerate(streams):
        key = (view.ip(source), view.ip(destination), ports[ps])
        for hop, (switch, next_node) in enumerate(zip(path[1:-1], path[2:])):
            if hop == 0:
                meters[switch][index] = rate
            flows[switch][key] = (view.out_port(switch, next_node), index if hop == 0 else None)
    admission = admission or {}
    return {switch: SteeringShare(flows.get(switch, {}), meters.get(switch, {}),
                                  *admission.get(switch, (frozenset(), frozenset())))
            for switch in set(flows) | set(admission)}


def crosses(result, down_links):
    """Whether a plan's streams use any of the links (frozensets of two nodes)."""
    return any(frozenset(edge) in down_links
               for _s, _d, path, _r, _ps in result.streams() for edge in edges_of(path))
