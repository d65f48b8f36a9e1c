"""The round of a gather job (POST /jobs {"gather": true}): an all-gather through the
round machinery at a ring's bytes.

Each worker holds one shard (colocated, in the workers' order: shard i on worker i),
and a shard's "sum" is its own worker's values alone: there are no gradients to plan,
only the return trees, each from its worker to the others. With P shards of S/P each
and f the round's rate, every tree runs at f/P; the busiest link, free capacity c
carrying k trees, allows f = P c / k. A worker's downlink carries the N-1 other
workers' trees, so on a fabric whose core is not the bottleneck each tree runs at
B/(N-1) and the round takes (N-1)/N S/B, a ring all-gather's time. An all-reduce plan
of the same colocated shards rates its trees at half that: its downlinks also carry
the gradients into their shards (docs/pytorch.md).
"""

from dataclasses import replace

from syncfabric.decisions.gradient_plan import GradientPlan, PlacementError
from syncfabric.decisions.round_bounds import downlink, free_mbps, ring_round_s, uplink
from syncfabric.decisions.round_planner import (MIN_RATE_MBPS, MULTICAST, RoundPlan, return_trees,
                                               tree_loads)

GATHER = "gather"   # the policy its (empty) gradient plan names


def plan_gather(view, workers, model_mbit, reserved_mbps=None, returns=MULTICAST):
    """The gather job's RoundPlan on what reserved_mbps leaves free: shards on `workers`
    in their order, return trees at f/P each, no gradient legs; PlacementError where a
    link it needs has nothing left."""
    pss = list(workers)
    trees = return_trees(view, workers, pss, reserved_mbps, returns)
    per_tree = tree_rate_mbps(view, trees, reserved_mbps)
    if per_tree < MIN_RATE_MBPS:
        raise PlacementError("no rate left for the return trees of %s" % ", ".join(pss))
    f = per_tree * len(pss)
    trees = [replace(tree, bandwidth_mbps=per_tree) for tree in trees]
    gradients = GradientPlan(GATHER, {ps: 1.0 / len(pss) for ps in pss}, f, f, 0.0, f, f,
                             {}, {}, f)
    ring_s = ring_round_s(view, workers, model_mbit, reserved_mbps)
    return RoundPlan(pss, per_tree, trees, gradients, model_mbit / f,
                     gather_bound_s(view, workers, model_mbit, reserved_mbps),
                     None if ring_s is None else ring_s / 2)


def tree_rate_mbps(view, trees, reserved_mbps=None):
    """The rate every one of `trees` may run at, all at one rate: the least of each
    link's free capacity over the trees on it."""
    return min((free_mbps(view, edge, reserved_mbps) / count
                for edge, count in tree_loads(trees, 1.0).items()), default=0.0)


def gather_bound_s(view, workers, model_mbit, reserved_mbps=None):
    """No all-gather of `model_mbit` among `workers` is shorter: each worker takes in the
    others' (N-1)/N of it, and sends its own 1/N at least once."""
    n = len(workers)

    def free(link):
        return max(free_mbps(view, link, reserved_mbps), 1e-12)
    return max(max((n - 1) / n * model_mbit / free(downlink(view, w)),
                   model_mbit / n / free(uplink(view, w)))
               for w in workers)
