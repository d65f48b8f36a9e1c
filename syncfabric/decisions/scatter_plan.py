"""The round of a scatter job (POST /jobs {"scatter": true}): a reduce-scatter through
the round machinery, the gradient half of a round.

Each worker holds one shard (colocated, in the workers' order: shard i on worker i, its
range worker i's slice), and each shard's sum stays in its own worker: there are no
return trees to plan, only the gradients, as the planner plans them (aggregators
allowed), rated with no returns beside them. A worker's uplink carries its parts of the
N-1 other shards, (N-1)/N S, so on a fabric whose core and aggregators add nothing the
round takes (N-1)/N S/B, a ring reduce-scatter's time; an all-reduce round of the same
shards takes twice that, its downlinks also carrying the sums back (docs/pytorch.md).
"""

from syncfabric.decisions.fabric_view import available_graph
from syncfabric.decisions.gradient_plan import PlacementError
from syncfabric.decisions.round_bounds import free_mbps, ring_round_s, uplink
from syncfabric.decisions.round_planner import MIN_RATE_MBPS, RoundPlan, plan_gradients

NO_RETURNS = {}   # the loads the gradients are rated beside: none


def plan_scatter(view, workers, model_mbit, aggregation=True, reserved_mbps=None):
    """The scatter job's RoundPlan on what reserved_mbps leaves free: shards on `workers`
    in their order, their gradients planned with the aggregators (unless aggregation is
    False) and no return trees; PlacementError where nothing is left for them."""
    reserved = reserved_mbps or {}
    pss = list(workers)
    graph = available_graph(view, reserved, frozenset())
    aggregators = {a: c - reserved.get(a, 0.0) for a, c in view.aggregators.items()
                   if aggregation and c - reserved.get(a, 0.0) > MIN_RATE_MBPS}
    gradients = plan_gradients(graph, workers, pss, aggregators, NO_RETURNS)
    if gradients.aggregators_used():
        plain = plan_gradients(graph, workers, pss, {}, NO_RETURNS)
        if plain.f >= gradients.f:   # aggregators that raise no rate are left alone
            gradients = plain
    if gradients.f < MIN_RATE_MBPS:
        raise PlacementError("no rate left for the gradients to %s" % ", ".join(pss))
    ring_s = ring_round_s(view, workers, model_mbit, reserved_mbps)
    return RoundPlan(pss, gradients.f / len(pss), [], gradients, model_mbit / gradients.f,
                     scatter_bound_s(view, workers, model_mbit, reserved_mbps),
                     None if ring_s is None else ring_s / 2)


def scatter_bound_s(view, workers, model_mbit, reserved_mbps=None):
    """No reduce-scatter of `model_mbit` among `workers` is shorter: each worker sends its
    parts of the others' slices, (N-1)/N of it, which nothing can sum before they leave
    its host."""
    n = len(workers)
    return max((n - 1) / n * model_mbit / max(free_mbps(view, uplink(view, w), reserved_mbps),
                                              1e-12)
               for w in workers)
