"""Gradients straight to equal shards, planned without an LP, for rounds too wide for
one: a colocated round of 100 workers wants 100 shards (the ring's 2(N-1)/N S/B needs
P = N without aggregators), but its placement LP would have 9,900 fragments: InArt's
equal split for them ran past 150 s (1,000 take 2.8 s), and 10 shards, what the LP
could take, gave 7.96 S/B.

Every fragment (w, s) of share 1/P takes one of its shortest paths: the one whose
busiest link, with the fragment added, is least loaded relative to its capacity,
fragments taken worker by worker. Loads are per unit of the workers' rate f and start
from the return trees' R_e (gradient_plan), so the rate is the links' room over their
load: f = min_e c_e / L_e. No aggregator is used: where aggregators are scarce enough
that the planner needs this (as many shards as workers), they save little (1.91 against
1.98 S/B for 100 workers on 8x8 at 0.45x).
"""

import itertools

import networkx as nx

from syncfabric.decisions.gradient_plan import GradientPlan, Option, PlacementError, edges_of

POLICY = "equal-split"   # its split and the INA plan request it is installed with
MAX_PATHS = 8            # equal-cost paths a fragment may choose among


def plan(graph, workers, pss, returns=None, max_paths=MAX_PATHS):
    """GradientPlan of `workers`' gradients to `pss` (a PS that is also a worker keeps
    its own fragment) on `graph` (directed, capacity_mbps free for this job), with the
    return trees' `returns` ({directed link: R_e}); PlacementError if no rate is left."""
    share = 1.0 / len(pss)
    capacity = {(u, v): data["capacity_mbps"] for u, v, data in graph.edges(data=True)}
    load = dict(returns or {})
    switches = graph.subgraph(n for n, kind in graph.nodes(data="kind") if kind == "switch")
    switch_paths = {}   # (first switch, last switch): their shortest paths, found once
    legs = {}
    for worker in workers:
        for ps in pss:
            if ps == worker:
                continue
            ends = (attachment(graph.successors, worker), attachment(graph.predecessors, ps))
            if ends not in switch_paths:
                switch_paths[ends] = shortest_paths(switches, *ends, max_paths)
            paths = [(worker, *between, ps) for between in switch_paths[ends]]
            path = least_loaded(paths, load, capacity, share)
            for edge in edges_of(path):
                load[edge] = load.get(edge, 0.0) + share
            legs[worker, ps] = [(Option(ps, path), 1.0)]
    f = min((capacity.get(edge, 0.0) / used for edge, used in load.items() if used > 0),
            default=float("inf"))
    if not f > 0:
        raise PlacementError("no rate left for the gradients to %s" % ", ".join(pss))
    split = {ps: share for ps in pss}
    # no relaxation here: the plan's own rate stands for the LP's and its bound
    return GradientPlan(POLICY, split, f, f, 1.0, f, f, legs, {})


def attachment(neighbours, host):
    """The one switch a host sends to (neighbours: graph.successors) or hears from
    (graph.predecessors)."""
    switches = list(neighbours(host))
    if len(switches) != 1:
        raise PlacementError("host %s is attached to %d switches, not one" % (host, len(switches)))
    return switches[0]


def shortest_paths(switches, source, target, max_paths):
    """At most max_paths shortest paths source -> target on the switches' graph."""
    try:
        return list(itertools.islice(nx.all_shortest_paths(switches, source, target), max_paths))
    except nx.NetworkXNoPath:
        raise PlacementError("no path from switch %s to %s" % (source, target)) from None


def least_loaded(paths, load, capacity, share):
    """The path whose busiest link, with `share` more on it, is least loaded relative
    to its capacity (the first of equals)."""
    def busiest(path):
        return max((load.get(edge, 0.0) + share) / capacity[edge] if capacity[edge] > 0
                   else float("inf") for edge in edges_of(path))
    return min(paths, key=busiest)
