"""A worker's side of interleaving (docs/sharing.md): when its rounds may start, and
what it tells the controller of its iteration.

When the fabric interleaves jobs that share a link, the controller gives each a window
in a common period: the job's report says `period_s` and `phase_offset_s`, and its
rounds start at offset + k x period on the hosts' clock (time.time(), kept with NTP on
real hosts). A worker back from its compute starts its next round at the next window
(PhaseWindow.next_start); one late by less than LATE_FRACTION of the period starts at
once, rather than wait almost a whole period. A round borrows for `window_s` from its
window's start (PhaseWindow.borrow_until), from the start at what the controller
placed it at (`window_mbps`: its rate alone, the others keeping to their windows, or
less where jobs sharing its links were placed to meet it), not
probing up to it; one that overruns its window sends the rest at its floor, so
nothing stalls and the next job's round, in its own window, does not lose what it
borrows to it. (Borrowing on, two rounds that met lost borrowed
datagrams, halved their borrowed rates and ran long again, into the next windows.)

The controller learns the job's iteration from its workers (IterationTimes): how long
each one's last round took to come back, and how long its caller took between that and
the next round (its compute). They travel in the reads the worker makes anyway
(rate_following.JobFollower), with the generation of the rates its rounds out went at
(paced_query).
"""

import math
import time
from typing import NamedTuple, Optional

from syncfabric.hosts.packets.control_messages import finite

LATE_FRACTION = 0.25  # of the period: a round this late for its window starts at once;
# later, it waits for the next (a period lost). At half a period, two jobs whose windows
# fill the period ran into each other's windows at every slow round and fell in step.


class JobWindow(NamedTuple):
    """A job's window: its rounds start at phase_offset_s + k x period_s and borrow for
    window_s from then (None: as long as they take), from its start up to rate_factor
    times their floors in all (None: probing for what is idle, as without a window)."""
    period_s: float
    phase_offset_s: float
    window_s: Optional[float]
    rate_factor: Optional[float] = None


def window_of(report):
    """The JobWindow of a job's report, or None (no window, or one that is not a
    positive period and a finite offset: run freely); a window_s that is not a positive
    number (a controller that does not say it) bounds nothing, and a window_mbps that
    is not above the job's rate_mbps sets no rate to borrow up to."""
    period, offset, borrowing = (report.get(key) for key in ("period_s", "phase_offset_s",
                                                             "window_s"))
    if not (finite(period) and finite(offset)) or period <= 0:
        return None
    alone, floor = report.get("window_mbps"), report.get("rate_mbps")
    factor = alone / floor if finite(alone) and finite(floor) and alone > floor > 0 else None
    return JobWindow(float(period), float(offset) % float(period),
                     float(borrowing) if finite(borrowing) and borrowing > 0 else None,
                     factor)


class PhaseWindow:
    """The job's window as its latest report says (follow), read by the caller's thread."""

    def __init__(self, report):
        self.window = window_of(report)
        self.planned_by = None   # the window next_start last planned a round by

    def follow(self, report):
        self.window = window_of(report)   # replaced whole: the caller's thread reads it

    def next_start(self, now):
        """When a round asked for at `now` (time.time()) starts: its window's next start,
        or now-ish if it is late by less than LATE_FRACTION of the period (a moment in
        the past, which every worker of the job computes alike); None: no window.
        The window it planned by stays in planned_by: a report may move the window
        before the round's start is judged against it."""
        window = self.planned_by = self.window
        if window is None:
            return None
        period, offset = window.period_s, window.phase_offset_s
        windows_past = math.ceil((now - LATE_FRACTION * period - offset) / period)
        return offset + windows_past * period

    def borrow_until(self, start_at):
        """When a round started at start_at (its window's start, next_start's) stops
        borrowing (time.time()); None: it borrows as long as it takes."""
        window = self.window
        if window is None or window.window_s is None or start_at is None:
            return None
        return start_at + window.window_s


class IterationTimes:
    """The worker's latest round back (comm_s: from its start, or its call if later, to
    its last sum back) and the compute before the next round (compute_s: from that sum
    back until its caller asks for the next window or the next round, whichever first;
    not the wait for the window, or the period would grow by what it makes jobs wait)."""

    def __init__(self):
        self.started = {}      # round number -> when it started (time.time())
        self.back_at = None    # when the latest round's sums were all back
        self.comm_s = self.compute_s = None
        self.latest_called = None   # the newest round asked for

    def computed(self, now):
        """The caller is done computing (it asks for a window or a round) at `now`."""
        back_at = self.back_at
        if back_at is not None:
            self.compute_s, self.back_at = max(0.0, now - back_at), None

    def called(self, number, start_at, now):
        """Round `number` was asked for at `now`, to start at start_at (None: at once)."""
        self.computed(now)
        self.started[number] = max(now, start_at or now)
        latest = self.latest_called
        self.latest_called = number if latest is None else max(latest, number)

    def back(self, number, now):
        started = self.started.pop(number, None)
        if started is not None:
            self.comm_s, self.back_at = max(0.0, now - started), now

    def back_through(self):
        """The newest round up to which every round asked for is back (None: none yet),
        so that the worker sends nothing of them any more: while it computes, a new
        generation of rates need not wait for it to begin its next round."""
        started = dict(self.started)   # the caller's thread adds to it
        if started:
            return min(started) - 1 if min(started) > 0 else None
        return self.latest_called

    def query(self):
        """The GET query's part that says them: the round all are back through, and the
        iteration once both its parts are known."""
        back = self.back_through()
        said = "" if back is None else "&back=%d" % back
        comm_s, compute_s = self.comm_s, self.compute_s
        if comm_s is None or compute_s is None:
            return said
        return said + "&comm_s=%.4f&compute_s=%.4f" % (comm_s, compute_s)


def paced_query(rounds):
    """What a worker says in its reads of its rates in use (a GET query's tail): the
    oldest generation whose rates the first passes of its rounds in flight (`rounds`:
    {number: Round}, read from another thread) went at. A worker that began the round a
    new generation holds from before it read it sends that round at the old rates, which
    its meters must keep allowing until it is back (services/job_rounds.py)."""
    paced = [current.stats["generation"] for current in list(rounds.values())
             if current.stats["generation"] is not None]
    return "&paced=%d" % min(paced) if paced else ""


class WorkerCadence:
    """A worker's rounds in time, as it and the controller agree on them: its job's
    window (taken from every read of its job) and its iteration (said in every read)."""

    def __init__(self, report):
        self.window, self.timing = PhaseWindow(report), IterationTimes()

    def next_start(self):
        """When the next round may start (time.time(); None: at once). Asking ends the
        caller's compute, as the controller learns it."""
        now = time.time()
        self.timing.computed(now)
        return self.window.next_start(now)

    def query(self, borrowing, rounds):
        """What the worker says in its reads, as a query's tail: its iteration, the rate
        its first passes borrow (borrowing: transport/borrowing.Borrowing or None) and
        the rates its rounds out went at (rounds: {number: worker_rounds.Round})."""
        borrowed = "" if borrowing is None else "&borrowed_mbps=%.3f" % borrowing.said()
        return self.timing.query() + borrowed + paced_query(rounds)
