"""Weighted max-min fair rates (decisions/fair_shares.py), checked against the property
that defines them: every job is at its ceiling, or crosses a full resource on which no
job has a larger rate per weight (Bertsekas and Gallager's bottleneck condition)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncfabric.decisions.fair_shares import CEILING, Demand, borrowable_mbps, fair_rates

TOLERANCE = 1e-6


def test_two_jobs_on_one_link_split_it_and_a_third_elsewhere_takes_its_own():
    capacities = {"spine": 10.0, "other": 10.0}
    demands = {"a": Demand(1, 100.0, {"spine": 1.0}), "b": Demand(1, 100.0, {"spine": 1.0}),
               "c": Demand(1, 100.0, {"other": 2.0})}
    rates, bound_by = fair_rates(capacities, demands)
    assert rates == pytest.approx({"a": 5.0, "b": 5.0, "c": 5.0})
    assert bound_by == {"a": "spine", "b": "spine", "c": "other"}


def test_weights_divide_a_shared_link_and_a_job_below_its_share_leaves_the_rest():
    capacities = {"link": 12.0}
    rates, _ = fair_rates(capacities, {"heavy": Demand(2, 100.0, {"link": 1.0}),
                                       "light": Demand(1, 100.0, {"link": 1.0})})
    assert rates == pytest.approx({"heavy": 8.0, "light": 4.0})
    rates, bound_by = fair_rates(capacities, {"small": Demand(1, 2.0, {"link": 1.0}),
                                              "big": Demand(1, 100.0, {"link": 1.0})})
    assert rates == pytest.approx({"small": 2.0, "big": 10.0})
    assert bound_by == {"small": CEILING, "big": "link"}


def test_an_aggregator_is_a_resource_like_a_link():
    rates, bound_by = fair_rates({"agg": 9.0, "link": 100.0},
                                 {"a": Demand(1, 50.0, {"agg": 1.0, "link": 1.0}),
                                  "b": Demand(1, 50.0, {"agg": 0.5, "link": 1.0})})
    assert rates == pytest.approx({"a": 6.0, "b": 6.0})
    assert bound_by == {"a": "agg", "b": "agg"}


def check_max_min(capacities, demands, rates, bound_by):
    for resource, capacity in capacities.items():
        used = sum(rates[j] * d.per_mbps.get(resource, 0.0) for j, d in demands.items())
        assert used <= capacity * (1 + TOLERANCE) + TOLERANCE
    for job, demand in demands.items():
        assert rates[job] <= demand.ceiling * (1 + TOLERANCE)
        if bound_by[job] == CEILING:
            assert rates[job] >= demand.ceiling * (1 - TOLERANCE)
            continue
        resource = bound_by[job]
        used = sum(rates[j] * d.per_mbps.get(resource, 0.0) for j, d in demands.items())
        assert demand.per_mbps[resource] > 0 and used >= capacities[resource] * (1 - TOLERANCE)
        mine = rates[job] / demand.weight
        assert all(rates[other] / d.weight <= mine * (1 + TOLERANCE) + TOLERANCE
                   for other, d in demands.items() if d.per_mbps.get(resource, 0.0) > 0)


RESOURCES = ["r0", ("leaf1", "spine1"), "agg-spine1"]   # links are pairs, aggregators names
demand = st.builds(Demand, st.integers(1, 4).map(float), st.floats(0.5, 50.0),
                   st.dictionaries(st.sampled_from(RESOURCES), st.floats(0.1, 3.0), min_size=1))


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(RESOURCES), st.floats(1.0, 40.0), min_size=1),
       st.dictionaries(st.sampled_from("abcd"), demand, min_size=1))
def test_every_job_is_at_its_ceiling_or_has_a_full_bottleneck_where_it_is_largest(
        capacities, demands):
    rates, bound_by = fair_rates(capacities, demands)
    assert set(bound_by) == set(demands)
    check_max_min(capacities, demands, rates, bound_by)


def lexicographic_max_min(capacities, demands, step):
    """The weighted max-min fair rates by brute force: of every rate vector on a grid of
    `step` that fits the capacities and ceilings, the one whose rates per weight, sorted
    from the smallest, are lexicographically largest."""
    jobs = sorted(demands)
    grids = [np.arange(0.0, demands[j].ceiling + step / 2, step) for j in jobs]
    rates = np.stack(np.meshgrid(*grids, indexing="ij"), -1).reshape(-1, len(jobs))
    rates = np.minimum(rates, [demands[j].ceiling for j in jobs])
    for resource, capacity in capacities.items():
        load = rates @ np.array([demands[j].per_mbps.get(resource, 0.0) for j in jobs])
        rates = rates[load <= capacity + 1e-9]
    per_weight = np.sort(rates / np.array([demands[j].weight for j in jobs]), axis=1)
    best = np.lexsort(per_weight.T[::-1])[-1]
    return dict(zip(jobs, rates[best]))


@pytest.mark.parametrize("seed", range(12))
def test_small_instances_agree_with_a_brute_force_search(seed):
    rng = np.random.default_rng(seed)
    capacities = {resource: float(rng.choice([4.0, 6.0, 9.0])) for resource in ("a", "b", "c")}
    demands = {job: Demand(float(rng.choice([1.0, 2.0])), float(rng.choice([3.0, 5.0, 8.0])),
                           {r: float(rng.choice([0.0, 0.5, 1.0, 2.0])) for r in capacities})
               for job in ("x", "y", "z")}
    step = 0.05
    rates, _ = fair_rates(capacities, demands)
    brute = lexicographic_max_min(capacities, demands, step)
    assert rates == pytest.approx(brute, abs=4 * step)


def test_jobs_borrow_into_an_aggregator_only_what_its_bookings_leave_split_by_floors():
    # 9 Mbit/s, 6 booked: 4 by one job, 2 by another; together they borrow the 3 left
    assert borrowable_mbps(9.0, 6.0, 4.0) == pytest.approx(2.0)
    assert borrowable_mbps(9.0, 6.0, 2.0) == pytest.approx(1.0)
    assert borrowable_mbps(9.0, 9.0, 9.0) == 0.0   # full: nothing to borrow
    assert borrowable_mbps(9.0, 10.0, 5.0) == 0.0  # over-booked (a capacity that fell)
    assert borrowable_mbps(9.0, 6.0, 0.0) == 0.0   # none of its own floor there
