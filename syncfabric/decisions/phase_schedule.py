"""When jobs that share a bottleneck communicate: a common period and a phase offset
for each, so that their communication phases overlap as little as possible.

A training job alternates communication (a round) with compute. Jobs whose rounds run
at once on a link split it; jobs whose rounds take turns each have it whole (their
floors, and what they borrow of the idle link: docs/sharing.md). CASSINI (NSDI'24)
places every job's iteration on a circle whose perimeter is the common period and
turns the circles of jobs that share a link until their communication arcs overlap
least. Here, as there:

- Two jobs conflict where, each at its rate alone, together they would need more than
  a resource (a directed link or an aggregator) holds: `usage` gives each job's
  fraction of each resource at its rate alone. How much they conflict (the weight of
  their overlap) is the most by which they overfill a resource they share: two jobs
  that each need a link whole slow each other down twice as much as two that each
  need three quarters of it.
- Jobs that conflict, directly or through others, get one period: the longest of their
  iterations, or of any contended resource's busy time (the sum of its jobs'
  communication, each times its fraction), whichever is longer; PERIOD_MARGIN more, so
  that a round a little slower than its best still fits.
- Only jobs whose rounds fit in one iteration take turns (CASSINI places only jobs
  that are compatible): where a resource's busy time is more than FIT times their
  longest iteration, windows would stretch every job's iteration to it, while jobs
  that run freely and borrow what the others leave idle are served as fast on
  average and wait for no window. Such a group gets none (on 2x4x4, four jobs whose
  rounds each fill 0.7-1.0 of the links: 0.84x Gloo's mean completion with windows,
  1.00x without).
- Offsets are chosen greedily, longest communication first: each job goes where its arc
  overlaps least (weighted) with those already placed that it conflicts with, the candidates
  being the start of the period and the end of every placed arc (an arc packed against
  another's end is where an optimal placement can always be shifted). Planned again,
  a job keeps its previous place in the period where it does as well: every window
  moved costs the jobs a round that meets another.
- A job that conflicts with nobody gets no window (it runs freely).

tests/unit/test_phase_schedule.py checks it against a brute force on small cases.
"""

from dataclasses import dataclass

PERIOD_MARGIN = 0.05   # a period this much longer than the tightest (rounds vary)
# a group takes turns only if its busiest resource's communication is at most this
# many times its longest iteration: rounds measured while they met are long, and two
# jobs that fit exactly (each computing as long as it communicates) said 1.06x
FIT = 1.25
CONTENDED = 1.0 + 1e-9  # a resource whose jobs' fractions sum above this is contended


@dataclass(frozen=True)
class Iteration:
    """A job's iteration: its round's communication at line rate and its whole
    iteration (communication and compute), in seconds."""
    comm_s: float
    iteration_s: float


@dataclass(frozen=True)
class Window:
    """A job's communication window: it starts a round at phase_offset_s + k x
    period_s (k whole), its rounds lasting about comm_s."""
    period_s: float
    phase_offset_s: float
    comm_s: float


def schedule(iterations, usage, previous=None):
    """{job: Window} for the jobs of `iterations` ({job: Iteration}) that conflict with
    another, in groups whose rounds fit (FIT); usage: {job: {resource: fraction of it the job takes at its rate alone}};
    previous: {job: Window} planned before, whose places are kept where as good."""
    contended = contended_resources(usage)
    neighbours = conflicts(iterations, usage, contended)
    windows = {}
    for group in components(neighbours):
        busy = busiest_s(group, iterations, usage, contended)
        longest = max(iterations[job].iteration_s for job in group)
        if busy > FIT * longest:
            continue   # their rounds do not fit in one iteration: they run freely
        period = max(longest, busy) * (1.0 + PERIOD_MARGIN)
        offsets = place(group, iterations, neighbours, period, previous or {})
        windows.update({job: Window(period, offsets[job], iterations[job].comm_s)
                        for job in group})
    return windows


def contended_resources(usage):
    """The resources whose jobs, each at its line rate, need more than it holds."""
    totals = {}
    for fractions in usage.values():
        for resource, fraction in fractions.items():
            totals[resource] = totals.get(resource, 0.0) + fraction
    return {resource for resource, total in totals.items() if total > CONTENDED}


def conflicts(iterations, usage, contended):
    """{job: {job it conflicts with: weight}}: the most by which the two overfill a
    contended resource they share, at most 1 (jobs that conflict with none left out)."""
    neighbours = {}
    jobs = sorted(iterations)
    for i, first in enumerate(jobs):
        for second in jobs[i + 1:]:
            mine, theirs = usage.get(first, {}), usage.get(second, {})
            weight = min(1.0, max([mine[r] + theirs[r] - 1.0
                                   for r in set(mine) & set(theirs) & contended], default=0.0))
            if weight > CONTENDED - 1.0:
                neighbours.setdefault(first, {})[second] = weight
                neighbours.setdefault(second, {})[first] = weight
    return neighbours


def components(neighbours):
    """The groups of jobs that conflict, directly or through others, each sorted."""
    seen, groups = set(), []
    for start in sorted(neighbours):
        if start in seen:
            continue
        group, frontier = set(), [start]
        while frontier:
            job = frontier.pop()
            if job not in group:
                group.add(job)
                frontier.extend(set(neighbours[job]) - group)
        seen |= group
        groups.append(sorted(group))
    return groups


def busiest_s(group, iterations, usage, contended):
    """The busy time of the group's busiest contended resource in one iteration of each
    job: their communication there, each times its fraction (0 without one)."""
    busy = {}
    for job in group:
        for resource, fraction in usage.get(job, {}).items():
            if resource in contended:
                busy[resource] = busy.get(resource, 0.0) + iterations[job].comm_s * min(1.0, fraction)
    return max(busy.values(), default=0.0)


def place(group, iterations, neighbours, period, previous):
    """{job: offset in [0, period)}: longest communication first, each where it overlaps
    least with the placed jobs it conflicts with (ties: its previous place in the
    period, else the earliest offset)."""
    offsets = {}
    for job in sorted(group, key=lambda j: (-iterations[j].comm_s, str(j))):
        placed = [other for other in neighbours[job] if other in offsets]
        candidates = sorted({0.0} | {(offsets[other] + iterations[other].comm_s) % period
                                     for other in placed})
        if job in previous:
            before = previous[job]
            candidates.insert(0, before.phase_offset_s / before.period_s * period % period)
        offsets[job] = min(candidates, key=lambda offset: sum(
            neighbours[job][other] * arc_overlap(offset, iterations[job].comm_s, offsets[other],
                                                 iterations[other].comm_s, period)
            for other in placed))
    return offsets


def arc_overlap(first, first_s, second, second_s, period):
    """How long arcs [first, first + first_s) and [second, second + second_s) of a
    circle of perimeter `period` overlap (an arc as long as the circle covers it)."""
    first_s, second_s = min(first_s, period), min(second_s, period)
    first, second = first % period, second % period
    total = 0.0
    for shift in (-period, 0.0, period):
        start = max(first, second + shift)
        stop = min(first + first_s, second + shift + second_s)
        total += max(0.0, stop - start)
    return total

