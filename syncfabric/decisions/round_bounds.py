"""What a streaming round can be measured against before it runs: the line rate S/B, a
lower bound that no plan of the round beats, and the time a ring all-reduce would take
on the same links. Sizes are in megabits on the wire, rates in Mbit/s;
docs/streaming-round.md derives the bound.

The bound counts the volume every plan must put on the workers' links and on the links
into the shard holders, returns included. A colocated round of N workers and P shards
moves the other shards' returns, (P-1) S over the P shard holders' downlinks, and the
gradients into each shard, (N-1) S in all less what aggregation saves: an aggregator
summing k <= N-1 inputs saves (k-1)/k of what it takes in, so at most A (N-2)/(N-1)
over a round's time for aggregators of total capacity A. So

    T >= max(S/B, (N+P-2) S / (P B + A (N-2)/(N-1)))

on a fabric whose core is no narrower than its hosts' links (the ring's 2(N-1)/N S/B
without aggregators at P = N; S/B once A >= (N-1) B). Shards on dedicated hosts take
N S of gradients and no returns, so T >= N S / (P B + A (N-1)/N); shards in the
aggregators take N S through their own links. Each holds for any paths and any split,
fluid or integral; where the core is narrower the bound is lower than what any plan
reaches, never higher.
"""

from syncfabric.decisions.ina_problem import candidate_paths
from syncfabric.decisions.gradient_plan import edges_of
from syncfabric.decisions.sparse_lp import LpError, SparseLp

RING_PATHS = 4   # equal-cost paths a ring's step may spread over


def free_mbps(view, edge, reserved_mbps=None):
    return view.graph.edges[edge]["capacity_mbps"] - (reserved_mbps or {}).get(edge, 0.0)


def uplink(view, host):
    return host, view.attachment(host)[0]


def downlink(view, host):
    return view.attachment(host)[0], host


def bottleneck(view, workers, reserved_mbps=None):
    """(link, free Mbit/s) of the workers' links, either way, with least left: no round's
    return or gradients run faster than it allows."""
    links = [link(view, w) for w in workers for link in (downlink, uplink)]
    worst = min(links, key=lambda edge: free_mbps(view, edge, reserved_mbps))
    return worst, free_mbps(view, worst, reserved_mbps)


def line_rate_mbps(view, workers):
    """B: the workers' slowest link, either way; no job's rate alone exceeds it."""
    return min(min(view.graph.edges[uplink(view, w)]["capacity_mbps"],
                   view.graph.edges[downlink(view, w)]["capacity_mbps"]) for w in workers)


def line_rate_s(view, workers, model_mbit):
    """S/B: the model over the slowest worker link, either way; no round is shorter."""
    return model_mbit / line_rate_mbps(view, workers)


def free_aggregation_mbps(view, reserved_mbps=None):
    """A: what the aggregators can still sum, each no more than its link takes in."""
    reserved = reserved_mbps or {}
    return sum(max(0.0, min(capacity - reserved.get(a, 0.0), free_mbps(view, downlink(view, a),
                                                                         reserved)))
               for a, capacity in view.aggregators.items())


def lower_bound_s(view, workers, candidates, model_mbit, aggregation=True, reserved_mbps=None,
                  fewest=1):
    """No round with fewest..len(candidates) shards on `candidates` is shorter (module
    doc): the candidates are the workers' own hosts (colocated), other hosts, or the
    aggregators (in-network: aggregation is then off). The largest free downlinks are
    taken as the shards', so the bound holds whichever of them a plan picks."""
    n = len(workers)
    worker_links = [free_mbps(view, link(view, w), reserved_mbps)
                    for w in workers for link in (uplink, downlink)]
    floor = model_mbit / max(min(worker_links), 1e-12)
    ingress = sorted((free_mbps(view, downlink(view, h), reserved_mbps) for h in candidates),
                     reverse=True)
    colocated = bool(set(candidates) & set(workers))
    savings = 0.0
    if aggregation and n > 1:
        kept = (n - 2) / (n - 1) if colocated else (n - 1) / n
        savings = free_aggregation_mbps(view, reserved_mbps) * kept
    bounds = []
    for shards in range(max(1, fewest), len(ingress) + 1):
        volume = (n + shards - 2) if colocated else n
        absorb = sum(ingress[:shards]) + savings
        bounds.append(max(floor, volume * model_mbit / absorb) if absorb > 0 else float("inf"))
    return min(bounds, default=floor)


def ring_round_s(view, workers, model_mbit, reserved_mbps=None):
    """What a ring all-reduce of the model over `workers` (in their order, as Gloo's
    ring runs) takes on the free links: each of its 2(N-1) steps moves S/N from every
    worker to the next, at the rate r that the busiest link allows when each step
    spreads over the equal-cost paths (a fluid LP: no ring does better on these links).
    None for fewer than two workers."""
    n = len(workers)
    if n < 2:
        return None
    graph, lp, link_terms = view.graph, SparseLp(), {}
    lp.variable("r")
    for index, worker in enumerate(workers):
        successor = workers[(index + 1) % n]
        paths = candidate_paths(graph, worker, successor, RING_PATHS)
        lp.at_most([("r", 1.0)] + [(("p", index, path), -1.0) for path in paths], 0.0)
        for path in paths:
            for edge in edges_of(path):
                link_terms.setdefault(edge, []).append((("p", index, path), 1.0))
    for edge, terms in link_terms.items():
        lp.at_most(terms, max(0.0, free_mbps(view, edge, reserved_mbps)))
    try:
        rate = lp.maximize({"r": 1.0})["r"]
    except LpError:
        return None
    return 2 * (n - 1) / n * model_mbit / rate if rate > 0 else None
