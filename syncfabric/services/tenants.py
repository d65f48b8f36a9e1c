"""Many jobs on one fabric (no Ryu): the fabric's admission policy, and the re-planning
of live jobs' rates as jobs come and go.

Policies (PUT /fabric/policy):
- `first-come`: a job is planned on what the book leaves free and keeps its rate;
  one that finds too little is refused (409).
- `fair` (the default): max-min fair rates among the jobs that share a link or an
  aggregator (decisions/fair_shares.py). A new job is planned on what the others would
  leave at their minimum rates, admitted at its fair share, and the jobs it shares with
  are moved down to theirs first. It is refused only if its minimum, or another job's,
  cannot be met.
- `weighted`: as fair, each job's share in proportion to its `weight`.

A live job keeps its paths and nodes; only its rates move (services/job_rates.py), so
its hosts sum nothing differently. A job moved down is booked at its new rates at once
(a new job is planned on them), its hosts are told (its generation rises once, with
the round it takes effect from: services/job_rounds.py), and its meters are tightened
once its workers have reached that round. A job moved up has its meters loosened
before its hosts are told (services/rate_moves.py). When a job goes, the others grow
to their new shares.
"""

import contextlib
import logging
from dataclasses import replace

from syncfabric.decisions import round_bounds
from syncfabric.decisions.fair_shares import Demand, borrowable_mbps, fair_rates
from syncfabric.decisions.gradient_plan import PlacementError
from syncfabric.decisions.multicast_trees import InfeasibleTree, without_links
from syncfabric.errors import Conflict, InvalidRequest
from syncfabric.services.job_phases import JobPhases
from syncfabric.services.job_planning import beats_every_plain_round, planned_round
from syncfabric.services.rate_moves import CHANGE_TOLERANCE, RateMoves
from syncfabric.services.job_shares import (DEFAULT_WEIGHT, capacities, job_demand,
                                            min_rate_mbps, part_loads, rate_ceiling_mbps,
                                            reserved_beside)
from syncfabric.services.request_fields import check_fields
from syncfabric.traffic_classes import BORROWED_DSCP

LOG = logging.getLogger("syncfabric.jobs")
FIRST_COME, FAIR, WEIGHTED = "first-come", "fair", "weighted"
POLICIES = (FIRST_COME, FAIR, WEIGHTED)
STATE_NAME = "policy"
BUSY_WAIT_S = 60.0        # longest an admission waits for another's re-plan to end
NEW_JOB = "new"           # the job being admitted, among the demands


def parse_policy(body):
    """(policy, borrow, interleave) of PUT /fabric/policy's body; interleave defaults to
    false, and borrow to what interleave is: interleaving needs borrowing (a job alone
    in its window goes faster than its share only by borrowing the idle links)."""
    check_fields(body, {"policy", "borrow", "interleave"}, {"policy"})
    if body["policy"] not in POLICIES:
        raise InvalidRequest("policy must be one of %s" % ", ".join(POLICIES))
    interleave = body.get("interleave", False)
    if not isinstance(interleave, bool):
        raise InvalidRequest("interleave must be true or false (whether jobs that share a "
                             "link take turns to communicate)")
    borrow = body.get("borrow", interleave)
    if not isinstance(borrow, bool):
        raise InvalidRequest("borrow must be true or false (whether jobs may send beyond "
                             "their share, in the borrowed class)")
    if interleave and not (borrow and body["policy"] != FIRST_COME):
        raise InvalidRequest("interleave needs borrow (leave it out, or true) and a policy "
                             "other than first-come: a job alone in its window is faster "
                             "than its share only by borrowing what the others leave idle")
    return body["policy"], borrow, interleave


class Tenants:
    """The jobs service's (jobs) policy and re-planning. wait_until(condition, timeout_s):
    returns once condition(now) holds or the time is up, letting others run meanwhile."""

    def __init__(self, jobs, store, wait_until):
        self.jobs, self.store, self.wait_until = jobs, store, wait_until
        self.moves = RateMoves(jobs, wait_until)
        saved = store.load(STATE_NAME) or {}
        self.policy = saved.get("policy", FAIR)
        # jobs send beyond their share (their floor) in the borrowed class
        # (syncfabric/traffic_classes.py), told so in their reports (borrow_report)
        self.borrow = saved.get("borrow", False)
        # jobs that share a link take turns to communicate (services/job_phases.py)
        self.interleave = saved.get("interleave", False)
        self.phases = JobPhases(jobs)
        self.busy = False      # a re-plan is under way (they run one at a time)
        self.pending = False   # "grow" or "shrink": a job went, or the policy changed, while
        #                        a re-plan was under way: rebalance after it

    def show(self):
        return {"policy": self.policy, "policies": list(POLICIES), "borrow": self.borrow,
                "interleave": self.interleave}

    def set_policy(self, body, now):
        self.policy, self.borrow, self.interleave = parse_policy(body)
        self.store.save(STATE_NAME, {"policy": self.policy, "borrow": self.borrow,
                                     "interleave": self.interleave})
        LOG.info("admission policy: %s, %s%s", self.policy,
                 "jobs borrow what is idle" if self.borrow else "shares are caps",
                 ", communication interleaved" if self.interleave else "")
        self.rebalance(now, shrink=True)
        self.plan_phases(now)
        return self.show()

    def plan_phases(self, now):
        """Timer and policy change: the jobs' windows under interleaving, none without."""
        if not self.interleave or self.jobs.trees.book is None:
            self.phases.clear()
            return
        self.phases.plan(self.live_demands(), now)

    # --- admission --------------------------------------------------------------

    @contextlib.contextmanager
    def admitting(self, now):
        """A job's admission, from its plan (planned) until its trees and plan are booked
        or given up: one at a time under a sharing policy, and the jobs a release would
        grow meanwhile grow after it. Grown while the new job was being booked, they
        took the links its share was planned on, and it was planned again on what was
        left (a plan of 1.5x its bound where it had been planned at its bound)."""
        if self.policy == FIRST_COME:
            yield
            return
        self._start()
        try:
            yield
        finally:
            self._finish(now)

    def planned(self, job, book, now):
        """The round of a new job at the rate the policy gives it (its plan scaled to its
        share), after the jobs it shares with were moved down to their shares; Conflict
        (nothing changed) if its minimum or another job's cannot be met. Under
        first-come: planned on what is free. Called within admitting()."""
        view, request = book.view, job.request
        reserved = without_links(view, dict(book.reserved_mbps), self.jobs.fabric.down_links)
        if self.policy == FIRST_COME:
            return planned_round(view, request, reserved, self.jobs.metrics, self.jobs.offload)
        live = self.live_demands(job)
        left = left_by_others(view, reserved, live, self.jobs.jobs, self.jobs.fabric.down_links)
        request, tentative, targets = self._fairest(view, request, left, live)
        check_minimums(view, request, targets, live, self.jobs.jobs, self.policy)
        job.request = request
        self.moves.move({i: targets[i] for i in live}, now, "admission", shrink=True, grow=False)
        return scaled_round(tentative, targets[NEW_JOB])

    def _fairest(self, view, request, floors, live):
        """(request, its round, every job's share) of the new job planned on each of
        `floors` (left_by_others; the first: the others at their minimum) and, if it
        may aggregate and names no policy for its gradients, planned again without
        aggregators: of them, the one whose rounds, slowest first, are shortest
        (slowdowns). Every job's gradients may meet in the same aggregators' links, which
        the fabric's bisection would spare. Alone on the fabric, a first plan as short as
        any without aggregators can be is kept as is. A plan that does not fit is passed
        over, but for the first one."""
        requests = [request] + ([dict(request, aggregation=False)]
                                if request["aggregation"] and not request.get("gradient_policy")
                                else [])
        floor, candidates = floors[0], []
        for variant, on in [(r, f) for r in requests for f in (floors if live else floors[:1])]:
            if candidates and not live and beats_every_plain_round(view, request, floor,
                                                                   candidates[0][1]):
                break
            try:
                planned = planned_round(view, variant, on, self.jobs.metrics,
                                        self.jobs.offload)
            except (PlacementError, InfeasibleTree, ValueError):
                if variant is request and on is floor:
                    raise
                continue
            demands = dict({i: demand for i, (_rate, demand) in live.items()},
                           **{NEW_JOB: round_demand(view, variant, planned, self.policy)})
            candidates.append((variant, planned, self.shares(demands, live)))
        best = min(candidates, key=lambda candidate: slowdowns(self.jobs.jobs, candidate,
                                                               candidates))
        if best[0] is not request:
            LOG.info("new job: planned without aggregators, where its share is %.3f Mbit/s "
                     "rather than what sharing theirs gives", best[2][NEW_JOB])
        return best

    # --- re-planning ------------------------------------------------------------

    def rebalance(self, now, shrink=False):
        """Grow every live job to the rate the policy gives it now (after a job went), and
        with `shrink` (the policy changed) move down those above it, waiting for their
        workers; if a re-plan is under way, after it. A release never waits: a job
        left above its share after one is moved down at the next admission."""
        if self.policy == FIRST_COME or self.jobs.trees.book is None:
            return
        if self.busy:
            self.pending = self.pending or "grow"
            if shrink:
                self.pending = "shrink"
            return
        self.busy = True
        try:
            live = self.live_demands()
            targets = self.shares({i: demand for i, (_rate, demand) in live.items()}, live)
            self.moves.move(targets, now, "policy" if shrink else "release", shrink=shrink, grow=True)
        finally:
            self._finish(now)

    def _start(self):
        if not self.wait_until(lambda _now: not self.busy, BUSY_WAIT_S):
            raise Conflict("another job's admission is still moving the others; ask again")
        self.busy = True

    def _finish(self, now):
        self.busy = False
        if self.pending:
            shrink, self.pending = self.pending == "shrink", False
            self.rebalance(now, shrink)

    def borrow_report(self, job):
        """What a job's hosts are told of borrowing: None (they send at their rates: the
        fabric does not let jobs borrow, or the job asked not to), or the DSCP of the
        borrowed class, the ceiling of what they send in all (the workers' slowest link)
        and, per aggregator the job's gradients go through, what its workers may borrow
        into it in all (fair_shares.borrowable_mbps) of what the jobs whose rounds may
        run beside its own leave (under interleaving, those whose windows meet its own:
        JobPhases.co_active)."""
        book = self.jobs.trees.book
        # a job saved before its request could say `borrow` borrows where the fabric lets it
        if not (self.borrow and job.request.get("borrow", True)) or book is None:
            return None
        own = self._plan_loads(job)
        others = [other for other in self.jobs.jobs.values() if other is not job]
        active = set(self.phases.co_active(job.id, [other.id for other in others]))
        reserved = reserved_beside(book.reserved_mbps, [self._plan_loads(other)
                                                        for other in others
                                                        if other.id not in active])
        return {"dscp": BORROWED_DSCP,
                "ceiling_mbps": round_bounds.line_rate_mbps(book.view, job.request["workers"]),
                "aggregators_mbps": {
                    host: borrowable_mbps(capacity, reserved.get(host, 0.0), own.get(host, 0.0))
                    for host, capacity in sorted(book.view.aggregators.items())
                    if own.get(host, 0.0) > 0}}

    def _plan_loads(self, job):
        """{resource: Mbit/s} the job's gradient plan holds (none while it has none)."""
        live = self.jobs.plans.plans.get(job.plan_id)
        return {} if live is None else live.result.loads()

    def live_demands(self, leaving_out=None):
        """{job id: (rate, Demand)} of the installed jobs (with weight 1 under fair)."""
        jobs, found = self.jobs, {}
        for job in [j for j in jobs.jobs.values() if j.installed and j is not leaving_out]:
            demand = job_demand(job, jobs.trees, jobs.plans, jobs.trees.book.view)
            if demand is not None:
                rate, need = demand
                found[job.id] = (rate, need if self.policy == WEIGHTED
                                 else replace(need, weight=DEFAULT_WEIGHT))
        return found

    def shares(self, demands, live):
        """{job: Mbit/s} the policy gives `demands` on what other reservations (trees and
        plans no job holds) leave of the fabric; live: every installed job's (rate,
        Demand) by id (live_demands), whose holds are not other reservations."""
        book = self.jobs.trees.book
        room = capacities(book.view)
        held = loads_of(live)
        for resource, load in book.reserved_mbps.items():
            if resource in room:
                room[resource] -= max(0.0, load - held.get(resource, 0.0))
        for link in self.jobs.fabric.down_links:
            tail, head = tuple(link)
            room[tail, head] = room[head, tail] = 0.0
        return fair_rates(room, demands)[0]


def slowdowns(jobs, candidate, candidates):
    """Every job's predicted round at its share in `candidate` ((request, RoundPlan,
    {job: share}) of a new job) over its lower bound, slowest first. A plan of the new
    job that gets more Mbit/s may still make longer rounds (more bytes a round), so its
    plans are compared by what they make of every job's rounds. The new job's bound is
    its least among the `candidates`' plans (each is computed on the links it was
    planned on)."""
    _request, planned, targets = candidate
    bound = min(other.bound_s for _variant, other, _targets in candidates)
    found = [round_volume(planned) / targets[NEW_JOB] / bound if targets[NEW_JOB] > 0
             else float("inf")]
    for job_id, share in targets.items():
        if job_id != NEW_JOB:
            planned_before = jobs[job_id].round
            found.append(round_volume(planned_before) / share / planned_before.bound_s
                         if share > 0 else float("inf"))
    return sorted(found, reverse=True)


def round_volume(planned):
    """A RoundPlan's round times its gradients' rate (Mbit): its round at any rate is
    this over the rate, its plan scaled (scaled_round)."""
    return planned.predicted_s * planned.gradients.f


def round_demand(view, request, planned, policy):
    """The Demand of a job planned as `planned` (round_planner.RoundPlan)."""
    rate, loads = planned.gradients.f, part_loads(planned.gradients, planned.trees)
    weight = request.get("weight", DEFAULT_WEIGHT) if policy == WEIGHTED else DEFAULT_WEIGHT
    return Demand(weight, rate_ceiling_mbps(view, request),
                  {resource: load / rate for resource, load in loads.items()})


def scaled_round(planned, rate):
    """`planned` (a RoundPlan) with its gradients at `rate` and its trees in proportion."""
    factor = rate / planned.gradients.f
    return replace(planned, return_mbps=planned.return_mbps * factor,
                   trees=[replace(t, bandwidth_mbps=t.bandwidth_mbps * factor)
                          for t in planned.trees],
                   gradients=replace(planned.gradients, f=rate),
                   predicted_s=planned.predicted_s / factor)


def loads_of(live):
    """{resource: Mbit/s} the plans and trees of jobs `live` ({id: (rate, Demand)}) hold:
    each job's demand found once per admission (live_demands), not again per share."""
    held = {}
    for rate, demand in live.values():
        for resource, per_mbps in demand.per_mbps.items():
            held[resource] = held.get(resource, 0.0) + rate * per_mbps
    return held


def check_minimums(view, request, targets, live, jobs, policy):
    """Conflict unless the new job's share (targets[NEW_JOB]) and every live job's meet
    their minimums (jobs: {id: Job}, for their requests; policy: named in the error)."""
    minimum = min_rate_mbps(view, request)
    if targets[NEW_JOB] < minimum:
        raise Conflict("under the %s policy this job's share would be %.3f Mbit/s, below "
                       "its min_rate_mbps %.3f; nothing changed" % (
                           policy, targets[NEW_JOB], minimum),
                       fair_share_mbps=targets[NEW_JOB], min_rate_mbps=minimum)
    for job_id in sorted(live):
        other = min_rate_mbps(view, jobs[job_id].request)
        if targets[job_id] < other * (1 - CHANGE_TOLERANCE):
            raise Conflict("admitting this job would push job %d to %.3f Mbit/s, below its "
                           "min_rate_mbps %.3f; nothing changed" % (job_id, targets[job_id],
                                                                    other),
                           held_by=[job_id], fair_share_mbps=targets[NEW_JOB])


def left_by_others(view, reserved, live, jobs, down_links):
    """What the live jobs ({id: (rate, Demand)}) would leave of the fabric (`reserved`
    booked, `down_links` down), three ways, for a new job to be planned on: at their
    minimum rates (the most it can have), at the part of their rates an equal split
    with it leaves them, and at their rates now. Planned only on the first, it saw
    every link nearly free and laid its heaviest flows over the same links as theirs;
    planned around them, it takes the links they leave, and every share grows (2x4x4 at
    20 Mbit/s, jobs of 4 workers: two at 11.43 Mbit/s each became 13.33, their rate
    alone; three 7.27 became 8.89; four 5.33, 6.15)."""
    split = len(live) / (len(live) + 1)
    rates = [{job_id: min(rate, min_rate_mbps(view, jobs[job_id].request))
              for job_id, (rate, _demand) in live.items()},
             {job_id: rate * split for job_id, (rate, _demand) in live.items()},
             {job_id: rate for job_id, (rate, _demand) in live.items()}]
    return [without_links(view, reserved_at(reserved, live, at), down_links) for at in rates]


def reserved_at(reserved, live, rates):
    """`reserved` with every live job ({id: (rate, Demand)}) at rates[id] instead of its
    rate now (no more than it)."""
    kept = dict(reserved)
    for job_id, (rate, demand) in live.items():
        give_back = rate - min(rate, rates[job_id])
        for resource, per_mbps in demand.per_mbps.items():
            kept[resource] = max(0.0, kept.get(resource, 0.0) - give_back * per_mbps)
    return kept
