"""Two jobs that take turns (no Ryu): a job that names another in `turns_with` promises
that its rounds never run while the other's do, as a process group's gather job and
its all-reduce job (the group's calls run one after another). The fabric then books
each link and aggregator once for the pair: the larger of their loads, not the sum.

- The taker is planned inside its partner's booking: on what the partner holds, as if
  nothing else were free (inside), so that on every link it needs no more than that.
  Where that round misses its bound and one planned on the partner's holdings and what
  is free besides (beside) is shorter, it takes that one: what it needs beyond its
  partner's on a link is booked as its own. Inside the booking of an all-reduce job
  whose shards are on hosts of their own, a spine-to-leaf link held two of its return
  trees, which two gather trees then shared: 16 ranks' gather trees ran at 16.3/16
  Mbit/s where their downlinks allowed 16.3/15.
- The book credits the pair, on each link and aggregator, the lesser of the two's
  loads (ReservationBook.credit, under turns_key): booked twice, used once.
- The taker is no tenant of its own: fair shares count its partner alone
  (job_shares.job_demand), and when the partner's rates move, the taker's move by the
  same factor (services/rate_moves.py).
- The credit follows the pair's parts (book_turns): at the taker's admission, with
  every rate move, and at every follow of the jobs service, after a fault moved a part.
- A partner's release releases its takers. A partner has one taker of each kind at
  most (job_kind): a process group's gather job and its scatter job both take turns
  with its all-reduce job, each credited what it shares with that one's booking.
"""

import logging

from syncfabric.decisions.gradient_plan import PlacementError
from syncfabric.decisions.multicast_trees import InfeasibleTree, without_links
from syncfabric.decisions.round_planner import reaches
from syncfabric.errors import Conflict, InvalidRequest
from syncfabric.services.job_planning import planned_round
from syncfabric.services.job_shares import (TURNS_WITH, capacities, job_loads, part_loads,
                                            reserved_beside)

LOG = logging.getLogger("syncfabric.jobs")


def turns_key(job_id):
    """The key of the book's credit for the pair job `job_id` takes turns in."""
    return "turns-%d" % job_id


def partner_of(jobs, job):
    """The job `job` takes turns with (None if it names none, or that one is gone)."""
    partner_id = job.request.get(TURNS_WITH)
    return None if partner_id is None else jobs.jobs.get(partner_id)


def takers_of(jobs, job):
    """The jobs (installed or being admitted) that take turns with `job`."""
    return [other for other in jobs.jobs.values() if other.request.get(TURNS_WITH) == job.id]


def job_kind(request):
    """What a job's rounds do: "gather", "scatter" or "all-reduce"."""
    return "gather" if request.get("gather") else \
        "scatter" if request.get("scatter") else "all-reduce"


def check_partner(jobs, request):
    """Conflict or InvalidRequest (nothing changed) unless the job a new request names in
    turns_with is installed, takes turns with no other itself, has no taker of the new
    one's kind yet (job_kind), and has the same workers."""
    partner_id = request.get(TURNS_WITH)
    if partner_id is None:
        return
    partner = jobs.jobs.get(partner_id)
    if partner is None or not partner.installed:
        raise Conflict("turns_with names job %d, which is not installed: create the job "
                       "this one takes turns with first" % partner_id)
    if partner.request.get(TURNS_WITH) is not None:
        raise InvalidRequest("job %d takes turns with job %d itself: name that one"
                             % (partner_id, partner.request[TURNS_WITH]))
    kind = job_kind(request)
    taker = next((t for t in takers_of(jobs, partner) if job_kind(t.request) == kind), None)
    if taker is not None:
        raise Conflict("job %d already takes turns with job %d as its %s job; a job takes "
                       "turns with one other of each kind at most" % (taker.id, partner_id,
                                                                      kind))
    if sorted(partner.request["workers"]) != sorted(request["workers"]):
        raise InvalidRequest("a job takes turns only with a job of the same workers (job %d's "
                             "are %s)" % (partner_id, ", ".join(partner.request["workers"])))


def inside(view, partner_loads):
    """{resource: Mbit/s reserved} on which a taker is planned: every link and aggregator
    booked full but for what its partner holds there."""
    return reserved_beside(capacities(view), [partner_loads])


def beside(reserved_mbps, partner_loads):
    """{resource: Mbit/s reserved} on which a taker may be planned instead: what the book
    holds (reserved_mbps) but for its partner's loads, which it may share."""
    return reserved_beside(reserved_mbps, [partner_loads])


def pair_credit(partner_loads, own_loads):
    """{resource: Mbit/s} a pair is credited: on each, the lesser of the two's loads."""
    return {resource: min(load, partner_loads[resource])
            for resource, load in own_loads.items() if partner_loads.get(resource, 0.0) > 0}


def book_turns(jobs, taker, own_loads=None):
    """Credit the pair of `taker` (a job that takes turns) in the book, from its partner's
    loads now and its own (own_loads: Mbit/s it is about to hold, planned or at a new
    rate; else what it holds now); nothing once its partner is gone. Returns whether
    the credit changed."""
    book, key = jobs.trees.book, turns_key(taker.id)
    partner = partner_of(jobs, taker)
    credit = {}
    if partner is not None:
        own = own_loads if own_loads is not None else job_loads(taker, jobs.trees, jobs.plans)
        credit = pair_credit(job_loads(partner, jobs.trees, jobs.plans), own)
    before = book.credits.get(key, {})
    book.credit(key, credit)
    return book.credits.get(key, {}) != before


def turns_round(jobs, job):
    """The round of a new job that takes turns (None for any other job), under any policy
    and moving no other job: planned inside its partner's booking, or beside it where
    that is shorter or nothing fits inside (module doc), and its credit booked, before
    its trees, which fit only with it; PlacementError where it fits neither way."""
    partner = partner_of(jobs, job)
    if partner is None:
        return None
    view = jobs.trees.book.view
    partner_loads = job_loads(partner, jobs.trees, jobs.plans)
    planned, error = planned_on(jobs, job, inside(view, partner_loads))
    if planned is None or not reaches(planned, planned.bound_s):
        wider, wider_error = planned_on(jobs, job, beside(jobs.trees.book.reserved_mbps,
                                                          partner_loads))
        if wider is not None and (planned is None or not reaches(planned, wider.predicted_s)):
            LOG.info("job %d: planned beside job %d's booking, not inside it: %.3f s a "
                     "round, not %s", job.id, partner.id, wider.predicted_s,
                     "%.3f" % planned.predicted_s if planned else "none (%s)" % error)
            planned = wider
        if planned is None:
            raise PlacementError("neither inside job %d's booking nor beside it: %s"
                                 % (partner.id, wider_error))
    if jobs.jobs.get(job.id) is job:   # else it was released while planned: no credit left
        book_turns(jobs, job, part_loads(planned.gradients, planned.trees))
    return planned


def planned_on(jobs, job, reserved_mbps):
    """(the round of `job` planned on what reserved_mbps leaves free but the fabric's
    down links, None) or (None, why nothing fits there)."""
    view = jobs.trees.book.view
    try:
        return planned_round(view, job.request, without_links(view, reserved_mbps,
                                                              jobs.fabric.down_links),
                             jobs.metrics, jobs.offload), None
    except (PlacementError, InfeasibleTree) as error:
        return None, error


def release_takers(jobs, job, now):
    """Release the jobs that take turns with `job` (being released)."""
    for taker in takers_of(jobs, job):
        LOG.info("job %d takes turns with job %d: released with it", taker.id, job.id)
        jobs.release(taker.id, now)
        jobs.daemons.released(taker.id, "it took turns with job %d, which was released"
                              % job.id, now)


def follow_turns(jobs, now):
    """The credit of each pair that takes turns, as their parts are now (a fault may have
    moved one), saved with the trees when it changed; a job whose partner is gone (not
    restored after a restart) is released."""
    changed = False
    for job in [j for j in jobs.jobs.values() if j.installed and j.request.get(TURNS_WITH)]:
        if partner_of(jobs, job) is None:
            LOG.warning("job %d: job %d, with which it took turns, is gone: released",
                        job.id, job.request[TURNS_WITH])
            jobs.drop(job, now, "partner", "job %d, with which it took turns, is gone"
                      % job.request[TURNS_WITH])
            continue
        changed = book_turns(jobs, job) or changed
    if changed:
        jobs.trees.remember(now)
