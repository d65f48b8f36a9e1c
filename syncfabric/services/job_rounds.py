"""Where a job's workers are in their rounds, as they say when they read their job
(GET /jobs/<id>?worker=h1&round=N), and the round from which a new generation of its
rates holds (no Ryu).

Workers number their rounds alike (every worker calls them in the same order), so a
round number means the same round on every host. When the controller changes a job's
rates, it names in the job's report the `effective_round`: every host uses the new
rates from that round on and the old ones before it, so all hosts agree whatever
moment each reads the report. It is a few rounds past the furthest any worker has
said, so that no worker has begun it when it reads the report. The old rates'
meters are tightened only once every worker still reporting has passed it.

A worker that ends says so (`done=1`): it begins no more rounds, so a generation
need not wait for it to pass its effective round (a job's last rounds would otherwise
hold another's admission until the worker went quiet, QUIET_S). Nor need it wait for
a worker that says, in a read of that generation (its answer, or the worker's copy
the read found unchanged, holds the new rates), that every round before the effective
one is back (`back`): it sends nothing of them any more, and the round it begins next
goes at the new rates. A worker that computes between rounds (and under interleaving
waits for its window) thus holds an admission only as long as its round in flight,
not that and its compute. A worker that began the effective round before it read the
new generation paced it at the old rates; it says so (`paced`: the oldest generation
its rounds in flight were sent at), and it has not passed until that round is back.

Workers also say how long their last round took to come back (`comm_s`) and how long
their caller took between that and the next round (`compute_s`): the job's iteration,
from which interleaving plans its windows (services/job_phases.py); and the rate they
borrow beyond their floors (`borrowed_mbps`), which the job's report sums and lists
(`borrowed_by`: each worker holds its borrowing near the least of them).
"""

import math
from dataclasses import dataclass, field

from syncfabric.decisions.phase_schedule import Iteration

EFFECTIVE_MARGIN = 1   # rounds past the furthest reported, at least: the next to begin
READ_LAG_S = 1.0       # how long a worker may take to read a new generation: two reads (one
#                        that reads it later paces a round at the old rates, which its meters
#                        still allow until it reports)
QUIET_S = 5.0          # a worker not heard from for this long is not running rounds
# what a worker may say (GET /jobs/<id>?...), and the most of it that is believed
FIGURE_LIMITS = {"comm_s": 3600.0, "compute_s": 3600.0, "borrowed_mbps": 1e6}


@dataclass
class RoundReports:
    """{worker: (round it began last, when it said so)}, each worker's first report, its
    shortest round back (comm_s), its latest compute between rounds (compute_s) and the
    rate it borrows (borrowed_mbps)."""
    latest: dict = field(default_factory=dict)
    first: dict = field(default_factory=dict)
    comm_s: dict = field(default_factory=dict)
    compute_s: dict = field(default_factory=dict)
    borrowed_mbps: dict = field(default_factory=dict)
    back: dict = field(default_factory=dict)   # {worker: (round back through, generation)}
    paced: dict = field(default_factory=dict)  # {worker: oldest generation of its rounds out}

    def heard(self, worker, number, now, figures=None, back=None, generation=0, paced=None):
        """figures: {name: value} of FIGURE_LIMITS' names, as parse_figures gives them;
        back: the round every round of the worker's is back through (parse_back), said
        in a read of the job's `generation`; paced: the oldest generation whose rates its
        rounds in flight were sent at (parse_paced; None: none in flight, or not said)."""
        if isinstance(number, int) and not isinstance(number, bool) and number >= 0:
            self.latest[worker] = (number, now)
            self.first.setdefault(worker, (number, now))
            if back is not None and back <= number:
                self.back[worker] = (back, generation)
            self.paced[worker] = paced
        figures = figures or {}
        if "comm_s" in figures:
            self.comm_s[worker] = min(figures["comm_s"], self.comm_s.get(worker, figures["comm_s"]))
        if "compute_s" in figures:
            self.compute_s[worker] = figures["compute_s"]
        if "borrowed_mbps" in figures:
            self.borrowed_mbps[worker] = figures["borrowed_mbps"]

    def said(self, worker, number, now, query, generation):
        """What a worker says in a read of the job's `generation` (a GET's query: {name:
        text}): that it ends (`done`), or the round it began, with its figures, the
        round it is back through and the generation its rounds out were sent at."""
        if parse_done(query):
            self.ended(worker)
        else:
            self.heard(worker, number, now, parse_figures(query), parse_back(query),
                       generation, parse_paced(query))

    def ended(self, worker):
        """The worker begins no more rounds (it said done): it no longer runs."""
        self.latest.pop(worker, None)

    def borrowed(self, now):
        """The rate (Mbit/s) the running workers say they borrow, together; None if none
        has said."""
        said = self.borrowing(now)
        return round(sum(said.values()), 3) if said else None

    def borrowing(self, now):
        """{worker: the rate (Mbit/s) it says it borrows} of the running workers that said
        one: each worker holds its own to what the least of them borrows for its floor,
        since a fragment's sum waits for every worker's part (JobLayout.borrow_cap)."""
        return {w: self.borrowed_mbps[w] for w in sorted(self.running(now))
                if w in self.borrowed_mbps}

    def iteration(self, now, predicted_s):
        """The job's Iteration as its running workers say: its round, the shortest any
        came back in (the nearest to one with the links to itself) or `predicted_s` if
        shorter or none said it (a job whose rounds always met others'), and that plus
        the longest compute (0 until one says); None while no worker runs."""
        running = self.running(now)
        if not running:
            return None
        said = [self.comm_s[w] for w in running if w in self.comm_s]
        comm_s = min([predicted_s] + ([max(said)] if said else []))
        compute_s = max([self.compute_s[w] for w in running if w in self.compute_s], default=0.0)
        return Iteration(comm_s, comm_s + compute_s)

    def pace(self, now):
        """Rounds a second of the fastest running worker, since its first report."""
        paces = [(n - self.first[w][0]) / (at - self.first[w][1])
                 for w, (n, at) in self.latest.items()
                 if now - at <= QUIET_S and at > self.first[w][1]]
        return max(paces, default=0.0)

    def running(self, now):
        """{worker: its round} of the workers heard from within QUIET_S."""
        return {w: n for w, (n, at) in self.latest.items() if now - at <= QUIET_S}

    def effective_round(self, now):
        """The round a generation made now takes effect from: EFFECTIVE_MARGIN past the
        furthest a running worker has reached, and the rounds it begins in READ_LAG_S
        (0: none runs, so any round)."""
        running = self.running(now)
        if not running:
            return 0
        return max(running.values()) + EFFECTIVE_MARGIN + int(self.pace(now) * READ_LAG_S)

    def passed(self, effective_round, now, generation=None):
        """Whether every running worker has begun `effective_round`, or (in a read of
        `generation`, the one whose rates hold from it, or a later one) has every round
        before it back: the old rates are no longer used by any of them. A worker that
        says a round in flight was sent at a generation before `generation` still uses
        the old rates, whatever round it began."""
        def done(worker, number):
            back, read = self.back.get(worker, (-1, None))
            paced = self.paced.get(worker)
            if generation is not None and paced is not None and paced < generation:
                return False
            return number >= effective_round or (
                generation is not None and read is not None and read >= generation
                and back >= effective_round - 1)
        return all(done(w, n) for w, n in self.running(now).items())


def parse_round_report(worker, number):
    """(worker, round) from a GET's query: the round as a whole number, None when the
    query has no round or it is not one (the report is then just a read)."""
    try:
        number = int(number) if number is not None else None
    except ValueError:
        number = None
    return (worker, number) if worker and number is not None else (None, None)


def parse_back(query):
    """The round a GET's query ({name: text}) says its worker is back through (`back`),
    as a whole number from 0 up; None if it says none or not one."""
    try:
        back = int(query.get("back"))
    except (TypeError, ValueError):
        return None
    return back if back >= 0 else None


def parse_paced(query):
    """The oldest generation a GET's query ({name: text}) says its worker's rounds in
    flight were sent at (`paced`), as a whole number from 1 up; None if it says none or
    not one."""
    try:
        paced = int(query.get("paced"))
    except (TypeError, ValueError):
        return None
    return paced if paced >= 1 else None


def parse_done(query):
    """Whether a GET's query ({name: text}) says its worker ends (done=1)."""
    return query.get("done") == "1"


def parse_figures(query):
    """{name: value} of the figures of FIGURE_LIMITS a GET's query ({name: text}) says:
    each a number from 0 to its limit; anything else is left out (a worker that cannot
    say)."""
    figures = {}
    for name, limit in FIGURE_LIMITS.items():
        try:
            value = float(query.get(name))
        except (TypeError, ValueError):
            continue
        if math.isfinite(value) and 0.0 <= value <= limit:
            figures[name] = value
    return figures
