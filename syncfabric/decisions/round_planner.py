"""The streaming synchronous round's plan: how many PS shards and on which hosts, each
shard's return tree and its rate, and how the gradients are aggregated on the way in;
with the round time the plan predicts and a lower bound on any round on the fabric.

A round moves each worker's gradient out (S over its uplink) and the new model in (S
over its downlink). The two directions overlap on full-duplex links, so no round is
shorter than S/B for the slowest worker link. Every gradient bit must also enter an
aggregator (processing capacity C_a) or a PS host's link before it is summed, so
N S <= T (sum_a C_a + the ingress of every host that may hold a shard). The larger
of the two is `lower_bound_s`.

For P = 1..max_pss, `plan_round` puts the shards on P candidate hosts taken round
robin over their switches (spreading their ingress), on P of the workers
themselves (co-located: each keeps its own fragment of its shard), or on P of the
aggregators (in-network: the switch sums its shard and multicasts it back, as SwitchML
does, and no host is on the way: the gradients go straight to the shards), reserves each
shard's return tree from its PS to the workers at r = B/P (the workers' downlinks
carry all P; a co-located PS's freed share takes its shard's gradients),
and plans the gradients on what the trees leave: GRID for one PS, InArt's phase 2
with equal shards for several (their trees carry equal rates). The round takes
max(S/f, S/(P r)) (f: a worker's gradient rate; the return of fragment k starts as
soon as its sum is complete, so the two overlap), and the P that predicts the
shortest round wins. Sizes are in megabits on the wire, rates in Mbit/s.
"""

from collections import defaultdict
from dataclasses import dataclass
from itertools import zip_longest

from syncfabric.decisions import ina_placement, inart_placement
from syncfabric.decisions.fabric_view import available_graph
from syncfabric.decisions.gradient_plan import PlacementError
from syncfabric.decisions.ina_problem import InaProblem
from syncfabric.decisions.inart_placement import InartProblem
from syncfabric.decisions.multicast_trees import InfeasibleTree, compute_tree

MIN_RATE_MBPS = 1e-6
MAX_PSS = 16       # shards a job may ask for (ina_plans takes 16 PSs a plan)
AUTO_MAX_PSS = 8   # shards "auto" tries at most: each more is another LP to solve
BOUND_REACHED = 1e-6   # a plan this close to the lower bound cannot be bettered
AUTO, DEDICATED, COLOCATED, IN_NETWORK = "auto", "dedicated", "colocated", "in-network"
PLACEMENTS = (AUTO, DEDICATED, COLOCATED, IN_NETWORK)


@dataclass
class RoundPlan:
    pss: list            # the shard holders, in shard order
    return_mbps: float   # each shard's return tree's rate
    trees: list          # multicast_trees.MulticastTree per PS
    gradients: object    # gradient_plan.GradientPlan on what the trees leave
    predicted_s: float
    bound_s: float


def free_mbps(view, edge, reserved_mbps=None):
    return view.graph.edges[edge]["capacity_mbps"] - (reserved_mbps or {}).get(edge, 0.0)


def bottleneck(view, workers, reserved_mbps=None):
    """(link, free Mbit/s) of the workers' links, either way, with least left: no round's
    return or gradients run faster than it allows."""
    links = [edge for w in workers for edge in ((view.attachment(w)[0], w),
                                                (w, view.attachment(w)[0]))]
    link = min(links, key=lambda edge: free_mbps(view, edge, reserved_mbps))
    return link, free_mbps(view, link, reserved_mbps)


def line_rate_mbps(view, workers):
    """B: the workers' slowest link, either way; no job's rate alone exceeds it."""
    return min(min(view.graph.edges[w, view.attachment(w)[0]]["capacity_mbps"],
                   view.graph.edges[view.attachment(w)[0], w]["capacity_mbps"])
               for w in workers)


def line_rate_s(view, workers, model_mbit):
    """S/B: the model over the slowest worker link, either way; no round is shorter."""
    return model_mbit / line_rate_mbps(view, workers)


def lower_bound_s(view, workers, candidates, model_mbit, aggregation=True):
    """No round with its shards on `candidates` is shorter (module doc). Candidates
    that are workers keep their own fragments: the shares kept add up to at most one
    model, so at least N - 1 models cross then."""
    absorb = sum(view.aggregators.values()) * aggregation + sum(
        view.graph.edges[view.attachment(h)[0], h]["capacity_mbps"] for h in candidates)
    crossing = len(workers) - (1 if set(candidates) & set(workers) else 0)
    return max(line_rate_s(view, workers, model_mbit), crossing * model_mbit / absorb)


def spread(view, candidates):
    """The candidates round robin over their switches, each switch's in the given order."""
    by_switch = defaultdict(list)
    for host in candidates:
        by_switch[view.attachment(host)[0]].append(host)
    return [h for column in zip_longest(*(by_switch[s] for s in sorted(by_switch)))
            for h in column if h is not None]


def plan_for(view, workers, pss, model_mbit, bound_s, reserved_mbps=None, aggregation=True):
    """The round with shards on `pss` (module doc), on what reserved_mbps leaves free of
    the workers' downlinks; PlacementError if it does not fit. aggregation: False plans
    the gradients straight to the PSs."""
    link = min(free_mbps(view, (view.attachment(w)[0], w), reserved_mbps) for w in workers)
    sending = min(free_mbps(view, (ps, view.attachment(ps)[0]), reserved_mbps) for ps in pss)
    return_mbps = min(link / len(pss), sending)   # a PS's own link may be the narrower
    if return_mbps < MIN_RATE_MBPS:
        raise PlacementError("no rate left on the workers' downlinks for the return trees")
    reserved = dict(reserved_mbps or {})
    trees = []
    for ps in pss:
        tree = compute_tree(view, ps, [w for w in workers if w != ps], return_mbps, reserved)
        trees.append(tree)
        for edge in tree.edges:
            reserved[edge] = reserved.get(edge, 0.0) + return_mbps
    graph = available_graph(view, reserved, frozenset())
    aggregators = {a: c - reserved.get(a, 0.0) for a, c in view.aggregators.items()
                   if aggregation}
    if len(pss) == 1:
        gradients = ina_placement.plan(InaProblem(graph, list(workers), pss[0], aggregators))
    else:
        gradients = inart_placement.plan(InartProblem(graph, list(workers), list(pss), aggregators),
                                         inart_placement.EQUAL_SPLIT)
    if gradients.f < MIN_RATE_MBPS:
        raise PlacementError("no rate left for the gradients to %s" % ", ".join(pss))
    predicted = max(model_mbit / gradients.f, model_mbit / (len(pss) * return_mbps))
    return RoundPlan(list(pss), return_mbps, trees, gradients, predicted, bound_s)


def plan_round(view, workers, candidates, model_mbit, max_pss=16, reserved_mbps=None,
               placement=DEDICATED, shards=None, aggregation=True):
    """The fastest round over P = 1..max_pss shards (module doc), or P = `shards`: on
    dedicated hosts among `candidates`, COLOCATED in the workers' own hosts (then P >=
    2: one shard in one worker's host is a PS beside workers, GRID's case) or IN_NETWORK
    on the aggregators.
    The widest spread is tried first: if it reaches the lower bound, the spread is
    halved while the plan still does, so few plans are computed (each takes tens of
    milliseconds) and few shards kept; else every P is tried."""
    if placement == COLOCATED:
        hosts, smallest = spread(view, workers), 2
    elif placement == IN_NETWORK:   # each shard's switch sums it: the gradients go straight there
        hosts, smallest, aggregation = spread(view, sorted(view.aggregators)), 1, False
    else:
        hosts, smallest = spread(view, [h for h in candidates if h not in workers
                                        and not view.is_aggregator(h)]), 1
    largest = min(max_pss, len(hosts)) if shards is None else shards
    if largest < smallest or largest > len(hosts):
        raise PlacementError("no %s for %s PS shard(s): %d of them"
                             % ({COLOCATED: "worker hosts", IN_NETWORK: "aggregators"}.get(
                                 placement, "free hosts"), shards or smallest, len(hosts)))
    bound = lower_bound_s(view, workers, hosts, model_mbit, aggregation)
    errors = []

    def attempt(count):
        try:
            return plan_for(view, workers, hosts[:count], model_mbit, bound, reserved_mbps,
                            aggregation)
        except (PlacementError, InfeasibleTree, ValueError) as error:
            errors.append(str(error))
            return None

    def at_bound(plan):
        return plan is not None and reaches(plan, bound)
    best = attempt(largest)
    if shards is not None or at_bound(best):
        count = largest // 2
        while shards is None and count >= smallest:
            narrower = attempt(count)
            if not at_bound(narrower):
                break
            best, count = narrower, count // 2
    else:   # the fastest, and of equals the fewest shards
        widest, best = best, None
        for count in range(smallest, largest + 1):
            plan = widest if count == largest else attempt(count)
            if plan is not None and (best is None or plan.predicted_s < best.predicted_s):
                best = plan
    if best is None:
        raise PlacementError("no round fits: %s" % "; ".join(list(dict.fromkeys(errors))[:3]))
    return best


def plan_job(view, workers, model_mbit, placement=AUTO, shards=None, aggregation=True,
             reserved_mbps=None):
    """The fastest round (plan_round) with its shards on dedicated hosts, in the workers'
    own (colocated), on the aggregators (in-network) or, with auto, whichever predicts
    the shortest round; of equals the one with the fewest hosts on a fragment's way
    (in-network, then dedicated: docs/streaming-round.md measures the difference)."""
    floor = line_rate_s(view, workers, model_mbit)
    rounds, errors = [], []
    for where in {AUTO: (IN_NETWORK, DEDICATED, COLOCATED)}.get(placement, (placement,)):
        try:
            plan = plan_round(view, workers, view.hosts, model_mbit, AUTO_MAX_PSS, reserved_mbps,
                              where, shards, aggregation)
        except PlacementError as error:
            errors.append(str(error))
            continue
        rounds.append(plan)
        # nothing is faster than S/B, nor than a dedicated plan at its bound (co-located's
        # is no lower)
        if reaches(plan, floor) or (where == DEDICATED and reaches(plan, plan.bound_s)):
            break
    if not rounds:
        raise PlacementError("; ".join(dict.fromkeys(errors)))   # each reason once
    return min(rounds, key=lambda plan: plan.predicted_s)   # min keeps the first of equals


def reaches(plan, bound_s):
    return plan.predicted_s <= bound_s * (1 + BOUND_REACHED)
