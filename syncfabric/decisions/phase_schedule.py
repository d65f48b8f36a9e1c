"""When jobs that share a bottleneck communicate: a common period and a phase offset
for each, so that what their communication phases need of each link at once exceeds
it as little as possible.

A training job alternates communication (a round) with compute. Jobs whose rounds run
at once on a link split it; jobs whose rounds take turns each have it whole (their
floors, and what they borrow of the idle link: docs/sharing.md). CASSINI (NSDI'24)
places every job's iteration on a circle whose perimeter is the common period and
turns the circles of jobs that share a link until, at every moment, the link carries
no more than it holds. Here, as there:

- A resource (a directed link or an aggregator) is contended where its jobs, each at
  its rate alone, need more than it holds together: `usage` gives each job's fraction
  of each resource at its rate alone. Jobs that share a contended resource, directly
  or through others, form a group.
- A group gets one period: the longest of its iterations, or of any contended
  resource's busy time (the sum of its jobs' communication, each times its
  fraction), whichever is longer; PERIOD_MARGIN more, so that a round a little slower
  than its best still fits.
- Only jobs whose rounds fit in one iteration take turns (CASSINI places only jobs
  that are compatible): where a resource's busy time is more than FIT times their
  longest iteration, windows would stretch every job's iteration to it, while jobs
  that run freely and borrow what the others leave idle are served as fast on
  average and wait for no window. Such a group gets none: jobs back to back (no
  compute) never fit.
- Offsets are chosen greedily, longest communication first, on STEPS steps of the
  period: each job goes where it adds least overflow (the fraction by which the jobs
  communicating at a moment overfill a resource, summed over the period and the
  resources). Three jobs that each take half of a link fit two at a time: judged in
  pairs, none conflicts with another, and the three were placed together. Planned
  again, a job keeps its previous place in the period where it does as well: every
  window moved costs the jobs a round that meets another.
- Where the period leaves no room to keep rounds apart, the rounds the placement makes
  meet on a resource they share send at less than their rates alone (shared_scale:
  together they fill it to SHARED_FILL at most), so they last longer. A group takes
  turns only if every job's round at that rate, and its compute, fit in the period:
  else its rounds would run into the next window, wait a period for the one after,
  and the jobs would finish later than running freely (four jobs on 2x4x4 whose
  windows met in threes alternated iterations of one and two periods: 0.83x Gloo's
  mean completion, docs/sharing.md). Such a group is planned again with every round
  at SHARED_FILL of its rate alone, as long as it then lasts, in a period long enough
  for that: jobs that together take at most a whole resource at their rates alone may
  then meet (four jobs that each take half of a link, in pairs), and no more may.
- A job on no contended resource gets no window (it runs freely).

tests/unit/test_phase_schedule.py checks it against a brute force on small cases.
"""

from dataclasses import dataclass, replace

import networkx as nx
import numpy as np
from scipy.linalg import circulant

PERIOD_MARGIN = 0.05   # a period this much longer than the tightest (rounds vary)
# a group takes turns only if its period (before PERIOD_MARGIN) is at most this many
# times its longest iteration: four jobs on 2x4x4 that ran freely, borrowing, took 1.6x
# their iterations alone (docs/sharing.md), so a period stretching an iteration by less
# pays; and rounds measured while they met are long (two jobs that fit exactly, each
# computing as long as it communicates, said 1.06x)
FIT = 1.4
# jobs whose rounds meet fill a resource they share to at most this, at their window
# rates: two paced jobs that each took half a link at their rates alone queued behind
# each other's datagrams, and their rounds lost 1303 borrowed datagrams in a run where,
# at 0.85 of that, they lost 126 (docs/sharing.md); a job alone in its window keeps its
# rate alone (one paced sender fills its link without that loss)
SHARED_FILL = 0.85
CONTENDED = 1.0 + 1e-9  # a resource whose jobs' fractions sum above this is contended
STEPS = 96   # the period's steps on which offsets are placed and overflow is summed


@dataclass(frozen=True)
class Iteration:
    """A job's iteration: its round's communication at its rate alone and its whole
    iteration (communication and compute), in seconds."""
    comm_s: float
    iteration_s: float


@dataclass(frozen=True)
class Window:
    """A job's communication window: it starts a round at phase_offset_s + k x
    period_s (k whole), its rounds lasting about comm_s at its rate alone, and sent at
    rate_scale times that rate (less than 1 where rounds placed to meet share a
    resource: shared_scale)."""
    period_s: float
    phase_offset_s: float
    comm_s: float
    rate_scale: float = 1.0


def schedule(iterations, usage, previous=None):
    """{job: Window} for the jobs of `iterations` ({job: Iteration}) that share a
    contended resource, in groups whose rounds fit (FIT); usage: {job: {resource:
    fraction of it the job takes at its rate alone}}; previous: {job: Window} planned
    before, whose places are kept where as good. A group whose rounds, planned at their
    rates alone, would meet and then outrun the period is planned again at SHARED_FILL
    of its rates (planned_at)."""
    contended = contended_resources(usage)
    placed = {}   # each group (a tuple of its jobs) -> its {job: Window}
    for group in groups(iterations, usage, contended):
        planned = planned_at(1.0, group, iterations, usage, contended, previous or {})
        if planned:
            placed[tuple(group)] = planned
    for group in outrunning(placed, iterations, usage):
        planned = planned_at(SHARED_FILL, group, iterations, usage, contended, previous or {})
        if planned:
            placed[group] = planned
        else:
            del placed[group]
    late = outrunning(placed, iterations, usage)
    windows = {job: window for group, planned in placed.items() if group not in late
               for job, window in planned.items()}
    return scaled(windows, usage)


def planned_at(scale, group, iterations, usage, contended, previous):
    """A group's {job: Window}, every round planned at `scale` of its rate alone (so
    lasting comm_s / scale), or None where its rounds do not fit (FIT) or, planned
    below their rates alone, would still overfill a resource where they meet: at 1.0,
    such rounds send at shared_scale; at SHARED_FILL, jobs that take at most a whole
    resource together at their rates alone fill it to SHARED_FILL where they meet."""
    at_scale = {job: Iteration(iterations[job].comm_s / scale,
                               iterations[job].iteration_s
                               + iterations[job].comm_s * (1.0 / scale - 1.0))
                for job in group}
    busy = busiest_s(group, iterations, usage, contended) / scale
    longest = max(at_scale[job].iteration_s for job in group)
    if max(longest, busy) > FIT * max(iterations[job].iteration_s for job in group):
        return None   # their rounds do not fit in one iteration: they run freely
    period = max(longest, busy) * (1.0 + PERIOD_MARGIN)
    offsets, overflow = place(group, at_scale, usage, contended, period, previous)
    if scale < 1.0 and overflow > 0:
        return None
    return {job: Window(period, offsets[job], at_scale[job].comm_s) for job in group}


def outrunning(placed, iterations, usage):
    """The groups of `placed` ({group: {job: Window}}) one of whose rounds, at the rate
    its window's meetings with every placed window leave it (shared_scale), does not
    fit in its period with its compute (fits_at_scale), or lasts long enough at that
    rate to meet rounds it was placed apart from (pairs of rounds of 1 s that each
    fill half a link, placed a second apart, last 1.18 s at SHARED_FILL and meet)."""
    every = {job: window for planned in placed.values() for job, window in planned.items()}
    scales = {job: shared_scale(job, usage, every) for job in every}
    lasting = {job: replace(window, comm_s=max(window.comm_s,
                                               iterations[job].comm_s / scales[job]))
               for job, window in every.items()}
    return [group for group, planned in placed.items()
            if not all(fits_at_scale(iterations[job], scales[job], window.period_s)
                       and shared_scale(job, usage, lasting) >= scales[job] - 1e-9
                       for job, window in planned.items())]


def scaled(windows, usage):
    """`windows` with their rate scales among themselves. The jobs of groups left to
    run freely are not counted, as no job without a window is (shared_scale): leaving
    them out only raises the others' scales, so those still fit."""
    return {job: replace(window, rate_scale=shared_scale(job, usage, windows))
            for job, window in windows.items()}


def fits_at_scale(iteration, scale, period):
    """Whether a job's round at `scale` of its rate alone, and its compute, fit in
    `period`, so that its next round starts in its next window."""
    compute_s = iteration.iteration_s - iteration.comm_s
    return iteration.comm_s / scale + compute_s <= period


def resource_totals(usage):
    """{resource: what its jobs need of it together, each at its rate alone} (usage:
    {job: {resource: fraction}})."""
    totals = {}
    for fractions in usage.values():
        for resource, fraction in fractions.items():
            totals[resource] = totals.get(resource, 0.0) + fraction
    return totals


def contended_resources(usage):
    """The resources whose jobs, each at its rate alone, need more than it holds."""
    return {resource for resource, total in resource_totals(usage).items() if total > CONTENDED}


def groups(iterations, usage, contended):
    """The jobs of `iterations` that share a contended resource, directly or through
    others: each group sorted, the groups by their first job (a job on none is in none)."""
    graph = nx.Graph()
    graph.add_edges_from((("job", job), ("resource", resource))
                         for job in iterations for resource in usage.get(job, {})
                         if resource in contended)
    found = [sorted(name for kind, name in component if kind == "job")
             for component in nx.connected_components(graph)]
    return sorted((group for group in found if group), key=lambda group: group[0])


def busiest_s(group, iterations, usage, contended):
    """The busy time of the group's busiest contended resource in one iteration of each
    job: their communication there, each times its fraction (0 without one)."""
    busy = {}
    for job in group:
        for resource, fraction in usage.get(job, {}).items():
            if resource in contended:
                busy[resource] = busy.get(resource, 0.0) + iterations[job].comm_s * min(1.0, fraction)
    return max(busy.values(), default=0.0)


def place(group, iterations, usage, contended, period, previous):
    """({job: offset in [0, period)}, the overflow left): longest communication first,
    each where it adds least overflow to what the placed jobs need of each contended
    resource (ties: its previous place in the period, else the earliest step)."""
    loads = {resource: np.zeros(STEPS) for resource in contended}
    offsets = {}
    for job in sorted(group, key=lambda j: (-iterations[j].comm_s, str(j))):
        mine = {r: min(1.0, f) for r, f in usage.get(job, {}).items() if r in contended}
        arcs = circulant(arc_steps(iterations[job].comm_s, period)).T   # row k: from step k
        cost = sum(added_overflow(loads[r], fraction * arcs) for r, fraction in mine.items())
        candidates = [(step * period / STEPS, step) for step in range(STEPS)]
        if job in previous:
            before = previous[job]
            kept = before.phase_offset_s / before.period_s * period % period
            candidates.insert(0, (kept, step_of(kept, period)))
        offsets[job], step = min(candidates, key=lambda candidate: cost[candidate[1]])
        for resource, fraction in mine.items():
            loads[resource] += fraction * arcs[step]
    return offsets, sum(np.maximum(0.0, load - 1.0).sum() for load in loads.values())


def arc_steps(comm_s, period):
    """1 on the steps a round of comm_s from the period's start covers (its last step
    covered whole: a round a step long is never placed in half a step), else 0."""
    covered = min(STEPS, int(np.ceil(comm_s / period * STEPS - 1e-9)))
    return np.r_[np.ones(covered), np.zeros(STEPS - covered)]


def step_of(offset, period):
    return int(round(offset / period * STEPS)) % STEPS


def added_overflow(load, extra):
    """How much more `load` (per step, in fractions of the resource) overfills it with
    `extra` on top: a number per row of `extra`."""
    return np.maximum(0.0, load + extra - 1.0).sum(axis=-1) - np.maximum(0.0, load - 1.0).sum()


def window_length_s(window):
    """How long a window's rounds borrow from its start: its round, PERIOD_MARGIN more."""
    return window.comm_s * (1 + PERIOD_MARGIN)


def apart(window, other, length_s=window_length_s):
    """Whether two windows (Window; other may be None) of one period never meet: on the
    period's circle, each starts after the other has ended, each lasting
    length_s(window) (its borrowing; or its round, Window.comm_s)."""
    if other is None or other.period_s != window.period_s:
        return False
    period = window.period_s
    ahead = (other.phase_offset_s - window.phase_offset_s) % period
    return length_s(window) <= ahead <= period - length_s(other)


def round_s(window):
    """How long a window's round lasts, as the solver placed it (no margin)."""
    return window.comm_s


def shared_scale(job, usage, windows):
    """What of its rate alone a job sends at in its window (windows: {job: Window}):
    1.0, or less where jobs whose rounds, as placed, meet its own share a resource with
    it and would fill it past SHARED_FILL, each at its rate alone (usage: {job:
    {resource: fraction of it at its rate alone}}): the fill brought down to SHARED_FILL.
    Rounds that meet only in their windows' margins (an overrun) do not count."""
    mine = windows[job]
    meeting = [other for other, window in windows.items()
               if other != job and not apart(mine, window, round_s)]
    scale = 1.0
    for resource, fraction in usage.get(job, {}).items():
        sharers = [usage[other][resource] for other in meeting
                   if usage.get(other, {}).get(resource, 0.0) > 0]
        fill = fraction + sum(sharers)
        if sharers and fill > SHARED_FILL:
            scale = min(scale, SHARED_FILL / fill)
    return scale
