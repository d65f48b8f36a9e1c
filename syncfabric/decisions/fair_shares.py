"""Weighted max-min fair rates for jobs that share links and aggregators.

A job's loads grow in proportion to its rate: at rate r (its workers' gradient rate,
Mbit/s) it puts r x a_e on resource e, a directed link or an aggregator, a_e being its
plan's load per Mbit/s. Progressive filling (Bertsekas and Gallager, Data Networks,
6.5.2) raises every unfrozen job's rate as weight x t until a resource is full or a
job reaches its ceiling (its rate alone on the fabric); the jobs on that resource, or
at that ceiling, are frozen there, and the rest go on. The result is the weighted
max-min fair allocation: no job's rate can grow without shrinking one whose rate per
weight is no larger.
"""

from dataclasses import dataclass

FULL = 1e-9   # of a resource's capacity: this close to full is full
CEILING = "ceiling"   # what bounds a job that reached its rate alone


@dataclass(frozen=True)
class Demand:
    """One job: its weight, its ceiling (Mbit/s) and {resource: load per Mbit/s}."""
    weight: float
    ceiling: float
    per_mbps: dict


def fair_rates(capacities, demands):
    """({job: Mbit/s}, {job: what bounds it: a resource, or CEILING}): the weighted
    max-min fair rates of `demands` ({job: Demand}) on `capacities` ({resource: Mbit/s}).
    A resource `capacities` lacks does not bound anyone."""
    free = dict(capacities)
    rates = {job: 0.0 for job in demands}
    bound_by = {}
    active = set(demands)
    while active:
        step, limit = filling_step(free, demands, active, rates)
        for job in active:
            grow = demands[job].weight * step
            rates[job] += grow
            for resource, load in demands[job].per_mbps.items():
                if resource in free:
                    free[resource] -= grow * load
        if limit == CEILING:
            done = {job for job in active if rates[job] >= demands[job].ceiling * (1 - FULL)}
        else:
            free[limit] = 0.0
            done = set()
        full = {r for r, room in free.items() if room <= FULL * max(1.0, capacities[r])}
        for job in active:
            on_full = sorted((r for r in full if demands[job].per_mbps.get(r, 0.0) > 0), key=str)
            if job in done or on_full:
                bound_by[job] = on_full[0] if on_full and job not in done else CEILING
        active -= set(bound_by)
    return rates, bound_by


def filling_step(free, demands, active, rates):
    """(t, what stops it): how far every active job's rate can grow, as weight x t, before
    a resource is full (that resource) or a job reaches its ceiling (CEILING)."""
    step, limit = None, None
    for resource, room in free.items():
        pull = sum(demands[j].weight * demands[j].per_mbps.get(resource, 0.0) for j in active)
        if pull > 0 and (step is None or room / pull < step):
            step, limit = max(0.0, room / pull), resource
    for job in active:
        headroom = max(0.0, demands[job].ceiling - rates[job]) / demands[job].weight
        if step is None or headroom < step:
            step, limit = headroom, CEILING
    return step, limit


def borrowable_mbps(capacity, reserved, own):
    """What a job may borrow, beyond its floor, into a resource of `capacity` Mbit/s
    (an aggregator) on which `reserved` is booked, `own` of it the job's: its floor's
    part of what the bookings leave, so that the jobs that borrow there together never
    ask more of it than it has."""
    if own <= 0 or reserved <= 0:
        return 0.0
    return max(0.0, capacity - reserved) * min(1.0, own / reserved)
