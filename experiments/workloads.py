"""Workloads the emulation and the simulator share: multicast jobs drawn at random, and
how evenly a set of links is loaded."""

import statistics


def make_jobs(hosts, jobs, receivers_per_job, rng):
    """[(source, [receivers])]: sources spread over hosts, receivers drawn at random."""
    sources = []
    while len(sources) < jobs:
        sources += rng.sample(hosts, len(hosts))
    return [(source, sorted(rng.sample([h for h in hosts if h != source], receivers_per_job)))
            for source in sources[:jobs]]


def spread(loads):
    """(max, coefficient of variation) of a list of utilizations."""
    mean = statistics.fmean(loads)
    return max(loads), (statistics.pstdev(loads) / mean if mean else 0.0)
