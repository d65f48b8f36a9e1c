"""The streaming synchronous round's plan: how many PS shards and on which hosts, each
shard's return tree, and how the gradients are aggregated on the way in; with the round
time the plan predicts, a lower bound on any round (round_bounds) and a ring's time.

For a number P of shards, `plan_round` puts them on P candidate hosts taken round robin
over their switches (spreading their ingress), on P of the workers themselves
(co-located: each keeps its own fragment of its shard), or on P of the aggregators
(in-network: the switch sums its shard and multicasts it back, as SwitchML does, and no
host is on the way: the gradients go straight to the shards). Each shard holds 1/P of
the model and returns it over a multicast tree to the workers (MULTICAST), or, as the
papers' baseline does, one copy per worker, each on a path of its own (UNICAST: a tree
of one receiver, so its host sends N copies of every sum).

One LP rates the gradients and the returns together (`plan_for`): a shard's sums are
complete only as fast as its gradients arrive, at f/P (f: a worker's gradient rate), so
its tree runs at f/P too and puts f/P on each of its links, in the same rows as the
gradients' legs (gradient_plan's R_e). GRID plans one shard's gradients, InArt's phase 2
with equal shards several; both keep the LP's fluid split where rounding loses. The
round then takes S/f: the return of fragment k starts as soon as its sum is complete,
so the two overlap. Booking the trees first at B/P left a colocated shard's downlink
B/P for the gradients into it: (N-1) S / B without aggregation, N/2 times the optimum.
A plan whose aggregators gain nothing is planned without them. Sizes are in megabits on
the wire, rates in Mbit/s.
"""

from collections import defaultdict
from dataclasses import dataclass, replace
from itertools import zip_longest

from syncfabric.decisions import direct_gradients, ina_placement, inart_placement
from syncfabric.decisions.fabric_view import available_graph
from syncfabric.decisions.gradient_plan import PlacementError
from syncfabric.decisions.ina_problem import InaProblem
from syncfabric.decisions.inart_placement import InartProblem
from syncfabric.decisions.multicast_trees import InfeasibleTree, compute_tree
from syncfabric.decisions.round_bounds import (downlink, free_mbps, line_rate_s, lower_bound_s,
                                               ring_round_s)

MIN_RATE_MBPS = 1e-6
MAX_PSS = 128      # shards a job may ask for, and PSs an INA plan may have (ina_plans)
AUTO_MAX_PSS = 8   # shards "auto" tries at most: each more is another LP to solve
# a round plans a fragment per worker and shard: past this many the LP takes seconds
# (32 workers x 32 shards: 2.9 s, x 16: 0.8 s, on 8x8 with aggregators), and the
# gradients go straight to their shards (direct_gradients)
LP_FRAGMENTS = 1024
BOUND_REACHED = 1e-6   # a plan this close to the lower bound cannot be bettered
GAIN = 1e-6        # aggregators that raise the rate by less gain nothing
AUTO, DEDICATED, COLOCATED, IN_NETWORK = "auto", "dedicated", "colocated", "in-network"
PLACEMENTS = (AUTO, DEDICATED, COLOCATED, IN_NETWORK)
MULTICAST, UNICAST = "multicast", "unicast"   # how a shard returns its sums
RETURNS = (MULTICAST, UNICAST)


@dataclass
class RoundPlan:
    pss: list            # the shard holders, in shard order
    return_mbps: float   # each return tree's rate (at an even split: its shard's share
    #                      of f sets each tree's own, bandwidth_mbps)
    trees: list          # the return trees (multicast_trees.MulticastTree): one per PS in
    #                      PS order, or with UNICAST one per PS and receiving worker
    gradients: object    # gradient_plan.GradientPlan, rated together with the trees
    predicted_s: float
    bound_s: float
    ring_s: float = None   # a ring all-reduce on the same free links (round_bounds)


def spread(view, candidates):
    """The candidates round robin over their switches, each switch's in the given order."""
    by_switch = defaultdict(list)
    for host in candidates:
        by_switch[view.attachment(host)[0]].append(host)
    return [h for column in zip_longest(*(by_switch[s] for s in sorted(by_switch)))
            for h in column if h is not None]


def return_receivers(workers, pss, returns=MULTICAST):
    """(shard host, its receivers) of every return tree, in PS order: each shard's tree
    to the other workers, or with UNICAST a tree to each of them alone."""
    groups = []
    for ps in pss:
        receivers = [w for w in workers if w != ps]
        groups += [(ps, receivers)] if returns == MULTICAST else [(ps, [w]) for w in receivers]
    return groups


def return_trees(view, workers, pss, reserved_mbps=None, returns=MULTICAST):
    """The return trees (return_receivers), chosen at the rate they would have if they
    alone filled the workers' downlinks (a worker's is shared by the shards' trees, a
    shard's uplink by its unicast copies), each booked before the next is chosen, so that
    they spread over the core (the LP then rates them); at any rate where that rate does
    not fit."""
    groups = return_receivers(workers, pss, returns)
    link = min(free_mbps(view, downlink(view, w), reserved_mbps) for w in workers)
    guess = max(MIN_RATE_MBPS, link / len(groups))
    reserved, trees = dict(reserved_mbps or {}), []
    for ps, receivers in groups:
        try:
            tree = compute_tree(view, ps, receivers, guess, reserved)
        except InfeasibleTree:
            tree = compute_tree(view, ps, receivers, MIN_RATE_MBPS, reserved)
        trees.append(tree)
        for edge in tree.edges:
            reserved[edge] = reserved.get(edge, 0.0) + guess
    return trees


def tree_loads(trees, share):
    """{directed link: R_e}: what the trees put on each link per unit of f, each at
    `share` of it (gradient_plan)."""
    return split_loads(trees, {tree.source: share for tree in trees})


def plan_gradients(graph, workers, pss, aggregators, returns):
    """The gradients to `pss`, rated with the trees' `returns`: GRID for one shard,
    InArt's phase 2 with equal shards for several, split as the LP splits them; past
    LP_FRAGMENTS fragments, straight to the shards without an LP (direct_gradients)."""
    if too_wide_for_lp(workers, pss):
        return direct_gradients.plan(graph, workers, pss, returns)
    if len(pss) == 1:
        return ina_placement.plan(InaProblem(graph, list(workers), pss[0], aggregators,
                                             returns=returns))
    return inart_placement.plan(InartProblem(graph, list(workers), list(pss), aggregators,
                                             returns=returns), inart_placement.EQUAL_SPLIT,
                                lp_split=True)


def planned_by_policy(graph, workers, pss, aggregators, trees, policy):
    """The gradients to `pss` as a named policy plans them (a paper's or a baseline's:
    ina_problem.POLICIES for one PS, inart_placement.POLICIES for several), rated with
    the return trees. InArt's split may give one shard more than another; its sums then
    complete, and its trees run, at f times its share, so a split that is not even is
    planned again with the trees' loads weighted by it."""
    if policy not in inart_placement.POLICIES:
        return ina_placement.plan(InaProblem(graph, list(workers), pss[0], aggregators,
                                             returns=tree_loads(trees, 1.0)), policy)
    even = tree_loads(trees, 1.0 / len(pss))
    gradients = inart_placement.plan(InartProblem(graph, list(workers), list(pss), aggregators,
                                                  returns=even), policy)
    if all(abs(share - 1.0 / len(pss)) <= GAIN for share in gradients.split.values()):
        return gradients
    weighted = split_loads(trees, gradients.split)
    return inart_placement.plan(InartProblem(graph, list(workers), list(pss), aggregators,
                                             returns=weighted), policy, split=gradients.split)


def split_loads(trees, split):
    """{directed link: R_e} of return trees each at its shard's share of f."""
    loads = {}
    for tree in trees:
        for edge in tree.edges:
            loads[edge] = loads.get(edge, 0.0) + split[tree.source]
    return loads


def too_wide_for_lp(workers, pss):
    """Whether the gradients of `workers` to `pss` have more fragments than the placement
    LP plans in seconds (LP_FRAGMENTS): they then go straight to the shards."""
    return len(workers) * len(pss) > LP_FRAGMENTS


def plan_for(view, workers, pss, model_mbit, bound_s, reserved_mbps=None, aggregation=True,
             returns=MULTICAST, policy=None):
    """The round with shards on `pss` (module doc), on what reserved_mbps leaves free;
    PlacementError if it does not fit. aggregation: False plans the gradients straight
    to the PSs, as does a plan whose aggregators would not raise its rate. returns:
    MULTICAST or UNICAST (module doc). policy: a named policy plans the gradients
    (planned_by_policy), aggregators or not, instead of the planner's choice."""
    reserved = reserved_mbps or {}
    trees = return_trees(view, workers, pss, reserved, returns)
    graph = available_graph(view, reserved, frozenset())
    aggregators = {a: c - reserved.get(a, 0.0) for a, c in view.aggregators.items()
                   if aggregation and c - reserved.get(a, 0.0) > MIN_RATE_MBPS}
    if policy is not None:
        gradients = planned_by_policy(graph, workers, pss, aggregators, trees, policy)
    else:
        gradients = planners_gradients(view, graph, workers, pss, aggregators, trees,
                                       model_mbit, reserved_mbps)
    if gradients.f < MIN_RATE_MBPS:
        raise PlacementError("no rate left for the gradients to %s" % ", ".join(pss))
    trees = [replace(tree, bandwidth_mbps=gradients.f * gradients.split[tree.source])
             for tree in trees]
    return RoundPlan(list(pss), gradients.f / len(pss), trees, gradients,
                     model_mbit / gradients.f, bound_s)


def planners_gradients(view, graph, workers, pss, aggregators, trees, model_mbit, reserved_mbps):
    """The planner's own gradients to `pss` (plan_gradients), rated with the trees at
    1/P of f each; without the aggregators where they would not raise the rate."""
    returns = tree_loads(trees, 1.0 / len(pss))
    gradients = plan_gradients(graph, workers, pss, aggregators, returns)
    if gradients.aggregators_used() and not beats_any_plain_plan(
            view, workers, pss, model_mbit, reserved_mbps, gradients.f):
        plain = plan_gradients(graph, workers, pss, {}, returns)
        if plain.f >= gradients.f * (1 - GAIN):
            gradients = plain
    return gradients


def beats_any_plain_plan(view, workers, pss, model_mbit, reserved_mbps, f):
    """Whether rate f beats every plan to `pss` without aggregators by more than GAIN:
    none is faster than their bound, so where f beats that, planning one (for 100
    workers, as long as the plan with them) can be left out."""
    plain_bound = lower_bound_s(view, workers, pss, model_mbit, False, reserved_mbps, len(pss))
    return f * (1 - GAIN) > model_mbit / plain_bound


def shard_hosts(view, workers, candidates, placement, aggregation=True):
    """(hosts in the order shards take them, fewest shards, aggregation) of a placement:
    the workers' own hosts (colocated: at least 2, one shard in one worker's host is a
    PS beside workers, GRID's case), the aggregators (in-network: each shard's switch
    sums it, so the gradients go straight there) or the other candidate hosts."""
    if placement == COLOCATED:
        return spread(view, workers), 2, aggregation
    if placement == IN_NETWORK:
        return spread(view, sorted(view.aggregators)), 1, False
    return spread(view, [h for h in candidates if h not in workers
                         and not view.is_aggregator(h)]), 1, aggregation


def shard_range(view, workers, candidates, placement, max_pss, shards=None, aggregation=True):
    """(hosts, fewest and most shards to try, aggregation) of a placement (shard_hosts):
    up to max_pss shards, or exactly `shards`; PlacementError if there are too few hosts."""
    hosts, smallest, aggregation = shard_hosts(view, workers, candidates, placement, aggregation)
    largest = min(max_pss, len(hosts)) if shards is None else shards
    if largest < smallest or largest > len(hosts):
        raise PlacementError("no %s for %s PS shard(s): %d of them"
                             % ({COLOCATED: "worker hosts", IN_NETWORK: "aggregators"}.get(
                                 placement, "free hosts"), shards or smallest, len(hosts)))
    return hosts, largest if shards is not None else smallest, largest, aggregation


def plan_round(view, workers, candidates, model_mbit, max_pss=16, reserved_mbps=None,
               placement=DEDICATED, shards=None, aggregation=True, returns=MULTICAST,
               policy=None):
    """The fastest round over P = 1..max_pss shards (module doc), or P = `shards`: on
    dedicated hosts among `candidates`, COLOCATED in the workers' own hosts or
    IN_NETWORK on the aggregators (shard_hosts), returning its sums as `returns` says,
    its gradients planned by `policy` if one is named (plan_for).
    Shard counts are tried doubling from the fewest, up to the widest, until a plan
    reaches the lower bound, so few plans are computed (a plan's LP grows with workers x
    shards: 1 to 3 s at 32 x 32) and few shards kept; a count whose own bound is above
    it is skipped. If none reaches it, every P up to AUTO_MAX_PSS is tried too, and
    beyond it the halvings of the widest, each unless its own bound is above the
    fastest plan found (100 workers: 100 shards, then no LP of 2 to 50)."""
    hosts, fewest, largest, aggregation = shard_range(view, workers, candidates, placement,
                                                      max_pss, shards, aggregation)
    bound = lower_bound_s(view, workers, hosts[:largest], model_mbit, aggregation, reserved_mbps,
                          fewest)
    errors = []

    def attempt(count):
        try:
            return plan_for(view, workers, hosts[:count], model_mbit, bound, reserved_mbps,
                            aggregation, returns, policy)
        except (PlacementError, InfeasibleTree, ValueError) as error:
            errors.append(str(error))
            return None

    def below(count, limit_s):   # a count whose own bound is above a limit cannot beat it
        own = lower_bound_s(view, workers, hosts[:count], model_mbit, aggregation,
                            reserved_mbps, count)
        return own <= limit_s * (1 + BOUND_REACHED)

    if shards is not None:
        best = attempt(largest)
    else:   # the fewest shards at the bound, else the fastest (of equals the fewest shards)
        plans = {}
        hopeful = [count for count in doublings(fewest, largest) if below(count, bound)]
        for count in hopeful + tried_counts(fewest, largest):
            found = [plan.predicted_s for plan in plans.values() if plan is not None]
            if count in plans or (found and not below(count, min(found))):
                continue
            plans[count] = attempt(count)
            if plans[count] is not None and reaches(plans[count], bound):
                break
        found = [plans[count] for count in sorted(plans) if plans[count] is not None]
        best = min(found, key=lambda plan: plan.predicted_s, default=None)
    if best is None:
        raise PlacementError("no round fits: %s" % "; ".join(list(dict.fromkeys(errors))[:3]))
    return best


def doublings(smallest, largest):
    """smallest, twice it, ... below largest, then largest."""
    counts = [smallest]
    while counts[-1] * 2 < largest:
        counts.append(counts[-1] * 2)
    return counts + [largest] if largest > smallest else counts


def tried_counts(smallest, largest):
    """The shard counts plan_round tries when the widest misses the bound, fewest first."""
    if largest <= AUTO_MAX_PSS:
        return list(range(smallest, largest + 1))
    halvings = {largest >> k for k in range(largest.bit_length())}
    return sorted(count for count in halvings | set(range(smallest, AUTO_MAX_PSS + 1))
                  if smallest <= count <= largest)


def placement_order(placement):
    return {AUTO: (IN_NETWORK, DEDICATED, COLOCATED)}.get(placement, (placement,))


def max_shards(placement, workers):
    """A colocated round may shard the model over every worker (up to MAX_PSS); the
    others try up to AUTO_MAX_PSS hosts."""
    if placement == COLOCATED:
        return min(MAX_PSS, max(2, len(workers)))
    return AUTO_MAX_PSS


def plan_job(view, workers, model_mbit, placement=AUTO, shards=None, aggregation=True,
             reserved_mbps=None, returns=MULTICAST, candidates=None, policy=None):
    """The fastest round (plan_round) with its shards on dedicated hosts (among
    `candidates`, all the fabric's by default), in the workers' own (colocated), on the
    aggregators (in-network) or, with auto, whichever predicts the shortest round; of
    equals the one with the fewest hosts on a fragment's way (in-network, then
    dedicated: docs/streaming-round.md measures the difference). Auto plans the
    placements from the lowest bound up, and stops at a plan that reaches S/B or the
    lowest bound, or before a placement whose bound is above a plan's. The plan carries
    what a ring all-reduce would take on the same links (ring_s). returns and policy:
    as plan_for."""
    floor = line_rate_s(view, workers, model_mbit)
    preference = placement_order(placement)
    bounds = {where: placement_bound(view, workers, where, model_mbit, shards, aggregation,
                                     reserved_mbps, candidates) for where in preference}
    lowest = min(bounds.values())
    rounds, errors = [], []
    # the lowest bound first: a placement whose bound is above a plan found cannot beat it
    for where in sorted(preference, key=lambda where: (bounds[where], preference.index(where))):
        if rounds and bounds[where] > min(plan.predicted_s for _where, plan in rounds) * (
                1 + BOUND_REACHED):
            break
        try:
            plan = plan_round(view, workers, candidates or view.hosts, model_mbit,
                              max_shards(where, workers), reserved_mbps, where, shards,
                              aggregation, returns, policy)
        except PlacementError as error:
            errors.append(str(error))
            continue
        rounds.append((where, plan))
        if reaches(plan, max(floor, lowest)):   # no placement can do better
            break
    if not rounds:
        raise PlacementError("; ".join(dict.fromkeys(errors)))   # each reason once
    _where, best = min(rounds, key=lambda item: (item[1].predicted_s, preference.index(item[0])))
    # the job's bound is over every placement it may take (one, unless auto)
    return replace(best, bound_s=lowest,
                   ring_s=ring_round_s(view, workers, model_mbit, reserved_mbps))


def placement_bound(view, workers, placement, model_mbit, shards=None, aggregation=True,
                    reserved_mbps=None, candidates=None):
    """plan_round's lower bound for a placement (infinite where it has too few hosts)."""
    try:
        hosts, fewest, largest, aggregation = shard_range(
            view, workers, candidates or view.hosts, placement, max_shards(placement, workers),
            shards, aggregation)
    except PlacementError:
        return float("inf")
    return lower_bound_s(view, workers, hosts[:largest], model_mbit, aggregation, reserved_mbps,
                         fewest)


def bound_without_aggregators_s(view, workers, model_mbit, placement=AUTO, shards=None,
                                reserved_mbps=None, candidates=None):
    """No plan of the job without aggregators is shorter: the lowest of its placements'
    bounds with aggregation off. A plan with them that reaches it needs no plain rival."""
    return min(placement_bound(view, workers, where, model_mbit, shards, False, reserved_mbps,
                               candidates)
               for where in placement_order(placement))


def reaches(plan, bound_s):
    return plan.predicted_s <= bound_s * (1 + BOUND_REACHED)
