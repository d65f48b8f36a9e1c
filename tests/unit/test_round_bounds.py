"""The streaming round's lower bound, checked by hand and against the best fluid plan,
and the joint plan of gradients and returns: within every capacity and at the bound
where the issue's table says it can be."""

import random

import pytest

from experiments.sim.fabrics import fat_tree, servers, spine_leaf
from syncfabric.decisions import round_bounds, round_planner
from syncfabric.decisions.fabric_view import available_graph
from syncfabric.decisions.model_shards import destinations, fragment_ranges
from tests.unit.test_round_planner import fabric, hosts

MODEL_MBIT = 10.0


def one_per_leaf(view, every):
    return servers(view)[::every]


def test_without_aggregators_the_bound_is_the_ring_and_the_plan_ties_it():
    view = spine_leaf("2x4", 4, 20)
    workers = one_per_leaf(view, 4)
    plan = round_planner.plan_job(view, workers, MODEL_MBIT, round_planner.COLOCATED)
    ring = 2 * 3 / 4 * MODEL_MBIT / 20   # 2(N-1)/N S/B
    assert plan.bound_s == pytest.approx(ring) \
        == pytest.approx(round_bounds.ring_round_s(view, workers, MODEL_MBIT))
    assert plan.predicted_s == pytest.approx(ring) and len(plan.pss) == 4


def test_partial_aggregation_the_colocated_two_by_four_reaches_its_bound():
    """(N+P-2) S / (P B + A (N-2)/(N-1)) with N = P = 4, B = 20, A = 2 x 9: 1.30 S/B,
    where booking the trees first predicted 2.07."""
    view = spine_leaf("2x4", 4, 20, aggregators="top", aggregator_bw=9)
    workers = one_per_leaf(view, 4)
    bound = 6 * MODEL_MBIT / (4 * 20 + 18 * 2 / 3)
    assert round_bounds.lower_bound_s(view, workers, workers, MODEL_MBIT, fewest=4) \
        == pytest.approx(bound) == pytest.approx(1.3043 * MODEL_MBIT / 20, rel=1e-4)
    plan = round_planner.plan_job(view, workers, MODEL_MBIT, round_planner.COLOCATED)
    assert plan.bound_s == pytest.approx(bound)
    assert plan.predicted_s <= 1.02 * 1.30 * MODEL_MBIT / 20
    assert plan.ring_s == pytest.approx(1.5 * MODEL_MBIT / 20)


def test_full_aggregation_the_bound_is_the_line_rate():
    view = fat_tree(4, 2, 20, aggregators="top", aggregator_bw=80)
    workers = one_per_leaf(view, 2)
    assert round_bounds.lower_bound_s(view, workers, workers, MODEL_MBIT) \
        == pytest.approx(MODEL_MBIT / 20)
    plan = round_planner.plan_job(view, workers, MODEL_MBIT, round_planner.COLOCATED)
    assert plan.predicted_s == pytest.approx(MODEL_MBIT / 20)


def test_dedicated_shards_take_every_gradient_less_what_aggregation_saves():
    view = fabric(2, 2, 3, 20, 1)
    # 4 workers' S into 2 PS links, aggregators of 2 x 1 Mbit/s saving 3/4 of what they take
    assert round_bounds.lower_bound_s(view, ["h1", "h2", "h4", "h5"], ["h3", "h6"], MODEL_MBIT) \
        == pytest.approx(4 * MODEL_MBIT / (2 * 20 + 2 * 3 / 4))


def booked(view, plan, reserved=None):
    """{resource: (load, capacity)}: the plan's gradients and return trees on what
    `reserved` left, every link and aggregator it uses."""
    load = dict(plan.gradients.loads())
    for tree in plan.trees:
        for edge in tree.edges:
            load[edge] = load.get(edge, 0.0) + tree.bandwidth_mbps
    free = available_graph(view, reserved or {}, frozenset())
    return {resource: (value, free.edges[resource]["capacity_mbps"] if isinstance(resource, tuple)
                       else view.aggregators[resource] - (reserved or {}).get(resource, 0.0))
            for resource, value in load.items()}


def widest_aggregate(plan, fragments=1000):
    """The most fragments any aggregator gets from its workers together, over the most it
    gets from one: 1 where every aggregate's ranges nest, as the LP's "an aggregate runs
    at its fastest input" assumes."""
    pss = list(plan.pss)
    held = fragment_ranges({s: 1 / len(pss) for s in pss}, fragments * len(pss))
    ranges = {}
    for (worker, ps), options in plan.gradients.legs.items():
        ranges.setdefault(worker, []).extend(
            {"ps": ps, "node": option.node, "share": share, "rate_mbps": 1.0}
            for option, share in options)
    per_aggregate = {}
    for legs in destinations(ranges, list(ranges), pss, held).values():
        for leg in legs:
            if leg["host"] != pss[leg["shard"]]:
                per_aggregate.setdefault((leg["host"], leg["shard"]), []).append(leg["fragments"])
    return max([len(set().union(*(range(*span) for span in spans)))
                / max(last - first for first, last in spans)
                for spans in per_aggregate.values()], default=1.0)


def test_sixteen_dedicated_workers_at_4x_get_aggregates_that_nest():
    """On 8x8 with aggregators at 4x, the repaired plan's split sent half of every
    fragment to two of four aggregators, which no common layout nests (the emulated round
    took 2.0x its prediction): the planner keeps only splits whose aggregates nest."""
    view = spine_leaf("8x8", 4, 10, aggregators="top", aggregator_bw=40)
    names = servers(view)
    plan = round_planner.plan_job(view, names[:16], MODEL_MBIT, round_planner.DEDICATED)
    assert plan.gradients.aggregates_nest() and widest_aggregate(plan) == pytest.approx(1.0)
    assert plan.predicted_s == pytest.approx(MODEL_MBIT / 10, rel=0.01)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("placement", [round_planner.COLOCATED, round_planner.DEDICATED])
def test_no_plan_beats_the_bound_and_every_plan_fits(seed, placement):
    """On small random fabrics: the bound is at most the fluid LP's round for every shard
    count (the LP relaxes the integral plans, so no integral plan beats it either), the
    chosen plan is no faster than the bound, and its gradients and trees together stay
    within every link and aggregator, on an empty fabric and beside other traffic."""
    rng = random.Random(seed)
    view = fabric(rng.randint(2, 3), rng.randint(2, 3), rng.randint(2, 3), 20,
                  rng.choice([5, 9, 20]), rng)
    names = hosts(view)
    rng.shuffle(names)
    workers = names[:rng.randint(3, len(names) - 1)]
    reserved = rng.choice([None, {edge: rng.uniform(0, 4) for edge in view.graph.edges}])
    candidates, smallest, aggregation = round_planner.shard_hosts(view, workers, names, placement)
    bound = round_bounds.lower_bound_s(view, workers, candidates, MODEL_MBIT, aggregation,
                                       reserved, smallest)
    for count in range(smallest, len(candidates) + 1):
        try:
            plan = round_planner.plan_for(view, workers, candidates[:count], MODEL_MBIT, bound,
                                          reserved)
        except Exception:   # a shard count whose trees do not fit: no plan to compare
            continue
        fluid_s = MODEL_MBIT / plan.gradients.f_lp
        assert bound <= fluid_s * (1 + 1e-9) and fluid_s <= plan.predicted_s * (1 + 1e-9)
        for resource, (load, capacity) in booked(view, plan, reserved).items():
            assert load <= capacity * (1 + 1e-6), resource
        assert widest_aggregate(plan) <= 1.01
    best = round_planner.plan_job(view, workers, MODEL_MBIT, placement, reserved_mbps=reserved)
    assert best.predicted_s >= best.bound_s * (1 - 1e-9)
    assert best.ring_s >= round_bounds.line_rate_s(view, workers, MODEL_MBIT) * (1 - 1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_a_round_too_wide_for_the_lp_goes_straight_to_its_shards_and_fits(seed, monkeypatch):
    """Past LP_FRAGMENTS every fragment takes a shortest path straight to its shard
    (direct_gradients): on small random fabrics, beside other traffic, its gradients and
    trees stay within every link, no aggregator is used, and no plan beats the bound."""
    monkeypatch.setattr(round_planner, "LP_FRAGMENTS", 0)
    rng = random.Random(seed)
    view = fabric(rng.randint(2, 3), rng.randint(2, 3), rng.randint(2, 3), 20, 9, rng)
    names = hosts(view)
    rng.shuffle(names)
    workers = names[:rng.randint(3, len(names))]
    reserved = rng.choice([None, {edge: rng.uniform(0, 4) for edge in view.graph.edges}])
    plan = round_planner.plan_job(view, workers, MODEL_MBIT, round_planner.COLOCATED,
                                  reserved_mbps=reserved)
    assert not plan.gradients.aggregators_used()
    assert set(plan.gradients.legs) == {(w, s) for w in workers for s in plan.pss if w != s}
    for resource, (load, capacity) in booked(view, plan, reserved).items():
        assert load <= capacity * (1 + 1e-6), resource
    assert plan.predicted_s >= plan.bound_s * (1 - 1e-9)


def test_a_hundred_colocated_workers_shard_over_all_of_them_and_tie_the_ring():
    """100 workers on 8x8 with aggregators at 0.45x: 100 shards without an LP (10, what
    one can take, gave 7.96 S/B), no slower than a ring on the same links."""
    view = spine_leaf("8x8", 13, 20, aggregators="top", aggregator_bw=9)
    plan = round_planner.plan_job(view, servers(view)[:100], MODEL_MBIT)
    assert len(plan.pss) == 100
    assert plan.bound_s <= plan.predicted_s <= plan.ring_s * (1 + 1e-6)
