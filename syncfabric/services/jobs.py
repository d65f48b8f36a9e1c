"""The streaming round as one resource (no Ryu): a job's PS shards, each shard's return
tree and the gradient plan toward them, planned together, admitted all or none, followed
through faults and released together.

A job is planned off the event loop on what the fabric's book leaves free
(round_planner.plan_job), then its return trees are created through the trees service
and its gradient plan through the INA plans service (on what the trees leave), each
confirmed by every switch; if any part is refused, or the job is deleted meanwhile,
what was made is released and nothing is left. The parts belong to the job (no client
can delete them alone). They move around failed links by their own make-before-break
moves; once every part has settled off the failed links, the job's `generation` goes
up by one, so a worker that sees it change reads the job again before its next round.
A job that loses a part (nothing fits around a fault) is released whole. A job with a
lease (ttl_s) is released when it runs out; its owner renews it (renew) while it runs,
so a job whose owner died, or could not DELETE it while the controller was away, goes.
"""

import hashlib
import itertools
import logging

from syncfabric.decisions.gradient_plan import PlacementError
from syncfabric.errors import Conflict, NotFound, NotReady, ServiceError
from syncfabric.services.job_daemons import DaemonWatch
from syncfabric.services.job_follow import follow_jobs
from syncfabric.services.job_parts import parts_of, release_parts
from syncfabric.services.job_records import Job, job_record
from syncfabric.services.job_reports import gradient_mbit, job_report
from syncfabric.services.job_refusals import refusal
from syncfabric.services.job_requests import check_job_hosts, lease_of, parse_job_request
from syncfabric.services.job_rounds import parse_round_report
from syncfabric.services.job_shares import shares_of
from syncfabric.services.tenants import Tenants
from syncfabric.services.trees import TreeSpec
from syncfabric.services.turn_taking import check_partner, release_takers, turns_round

LOG = logging.getLogger("syncfabric.jobs")
STATE_NAME = "jobs"


def expiry(ttl_s, now):
    return None if ttl_s is None else now + ttl_s


class Jobs:
    def __init__(self, fabric, trees, plans, store, metrics, offload, wait_until):
        self.fabric, self.trees, self.plans, self.metrics = fabric, trees, plans, metrics
        self.store = store
        self.offload = offload     # offload(fn, *args): fn(*args) off the event loop
        self.tenants = Tenants(self, store, wait_until)   # the policy; re-plans live jobs
        self.jobs = {}             # job id -> Job
        self.release_keys = {}     # job id -> the key that may DELETE it
        self.daemons = DaemonWatch()   # which daemons poll; why jobs were released
        # after a restart: the jobs saved, until their parts are back (until then the jobs
        # are not answered for: a daemon told "no jobs" would drop the ones it serves)
        self.saved = (store.load(STATE_NAME) or {}).get("jobs") or None
        self.next_ids = itertools.count(1)

    # --- the REST resource ------------------------------------------------------

    def create(self, body, release_key, now):
        request = parse_job_request(body)
        book = self.trees.ready_book()
        check_job_hosts(book.view, request)
        check_partner(self, request)
        job = Job(next(self.next_ids), request, book=book, expires_at=expiry(request["ttl_s"], now),
                  admitted_at=now)
        self.jobs[job.id], self.release_keys[job.id] = job, release_key
        try:
            with self.tenants.admitting(now):
                self._book(job, book, now)
        except (ServiceError, PlacementError) as error:
            release_parts(job, self.trees, self.plans, now)
            if self.jobs.pop(job.id, None) is not None:
                self.release_keys.pop(job.id, None)
            self.tenants.rebalance(now)   # the jobs moved down for it grow back
            raise refusal(error, book, request, self) from None
        job.installed, job.parts_seen = True, parts_of(job, self.trees, self.plans, now)
        self.remember(now)
        log_admitted(job)
        return dict(self.report(job, now), release_key=release_key)

    def _book(self, job, book, now):
        """The new job's round as the policy plans it (or inside its partner's booking, if
        it takes turns: turn_taking.py), then its trees and plan booked and installed."""
        job.round = turns_round(self, job) or self.tenants.planned(job, book, now)
        self._still_wanted(job)
        job.tree_ids = [r.tree_id for r in self.trees.create_trees(
            [TreeSpec(tree.source, list(tree.receivers), tree.bandwidth_mbps, tree=tree)
             for tree in job.round.trees],
            None, None, now)]
        self._still_wanted(job)
        job.plan_id = self.plans.create(plan_request(job), None, now,
                                        job.round.gradients)["id"]
        self._still_wanted(job)

    def list(self, now):
        """Every job whole (one that lost a part is left out: follow releases it)."""
        self._check_restored()
        reports = []
        for job in [self.jobs[i] for i in sorted(self.jobs) if self.jobs[i].installed]:
            try:
                reports.append(self.report(job, now))
            except NotFound:
                pass
        return {"jobs": reports}

    def live_count(self):
        return sum(job.installed for job in self.jobs.values())

    def show(self, job_id, now):
        return self.report(self._get(job_id), now)

    def list_tag(self):
        """The weak ETag of list() (listing_tag)."""
        return listing_tag(self.jobs, self.tenants.phases.version())

    def heard(self, job_id, worker, number, now, query=None):
        """A worker of the job says the round it began, and in `query` ({name: text}) how
        long its last round and compute took and what it borrows, or that it ends
        (services/job_rounds.py); the job's ETag (job_tag), with which it reads the job
        again only when it changed."""
        job = self._get(job_id)
        worker, number = parse_round_report(worker, number)
        if worker in job.request["workers"]:
            job.rounds.said(worker, number, now, query or {}, job.generation)
        return job_tag(job, self.tenants.phases.version())

    def owner_key(self, job_id):
        return self.release_keys.get(self._get(job_id).id)

    def release(self, job_id, now):
        """Release the job and every part of it, and the job that takes turns with it
        (turn_taking.py); a job still being admitted is undone by its creator, which
        finds it gone."""
        job = self.jobs.pop(self._get(job_id, installed=False).id)
        self.release_keys.pop(job.id, None)
        release_takers(self, job, now)
        try:
            report = self.report(job, now) if job.installed else {"id": job.id}
        except NotFound:   # a part is gone already (nothing fit around a fault)
            report = {"id": job.id, "generation": job.generation}
        release_parts(job, self.trees, self.plans, now)
        self.remember(now)
        LOG.info("job %d released", job.id)
        self.tenants.rebalance(now)   # the jobs it shared with grow to their new shares
        return report

    def renew(self, job_id, body, now):
        """Set the job's lease to body's ttl_s from now (null: no lease); its report."""
        job, ttl_s = self._get(job_id), lease_of(body)
        job.request["ttl_s"], job.expires_at = ttl_s, expiry(ttl_s, now)
        self.remember(now)
        return self.report(job, now)

    def _check_restored(self):
        if self.saved is not None:
            raise NotReady("the jobs saved before the controller restarted are being "
                           "restored; ask again in a second")

    def _get(self, job_id, installed=True):
        self._check_restored()
        try:
            job = self.jobs[int(job_id)]
        except (ValueError, TypeError, KeyError):
            raise NotFound("no job with id %r" % (job_id,),
                           **self.daemons.why_released(job_id)) from None
        if installed and not job.installed:
            raise NotFound("job %r is still being admitted" % (job_id,))
        return job

    # --- admission --------------------------------------------------------------

    def _still_wanted(self, job):
        if self.jobs.get(job.id) is not job:
            raise Conflict("job %d was released while being admitted; nothing is left of it"
                           % job.id)

    # --- what a job is told -----------------------------------------------------

    def report(self, job, now):
        shares = shares_of(self, job)
        return dict(job_report(job, self.trees, self.plans, now), **shares.get(job.id, {}),
                    borrow=self.tenants.borrow_report(job), borrowed_mbps=job.rounds.borrowed(now),
                    borrowed_by=job.rounds.borrowing(now),
                    **self.tenants.phases.report(job))

    # --- events and timers ------------------------------------------------------

    def follow(self, now):
        """Timer, every half second: restores, releases, generations, credits and windows
        (services/job_follow.py)."""
        follow_jobs(self, now)

    def drop(self, job, now, cause, reason):
        """Release `job` unasked: `cause` labels the metric, `reason` is what its daemons
        are told (DaemonWatch.released)."""
        if self.jobs.get(job.id) is job:
            self.release(job.id, now)
            self.metrics.releases.labels("jobs", cause).inc()
            self.daemons.released(job.id, reason, now)

    def fabric_changed(self, restored, now):
        """The parts went with the old fabric's book; after a restart, the saved jobs
        come back once their parts' services restored them (follow)."""
        for job_id in sorted(self.jobs):
            LOG.info("fabric changed: job %d is gone", job_id)
        self.jobs.clear()
        self.release_keys.clear()
        if restored:
            self.saved = (self.store.load(STATE_NAME) or {}).get("jobs", [])
        else:
            self.saved = None
            self.remember(now)

    # --- persistence ------------------------------------------------------------

    def remember(self, now):
        """Save the jobs for a restart (nothing without a state directory)."""
        self.store.save(STATE_NAME, {"jobs": [job_record(self.jobs[i], self.release_keys.get(i), now)
                                              for i in sorted(self.jobs) if self.jobs[i].installed]})



def listing_tag(jobs, windows):
    """A weak ETag of Jobs.list() from Jobs.jobs: it changes when a job is created,
    released or renewed, its generation rises (its parts or rates moved) or the jobs'
    windows move (`windows`: JobPhases.version), which is all a job's hosts act on;
    expires_in_s counts down regardless. A host that polls GET /jobs gets 304 while it
    holds (while saved jobs are restored too: it keeps what it serves)."""
    listed = [windows, [(job.id, job.generation, job.request["ttl_s"])
                        for _id, job in sorted(jobs.items()) if job.installed]]
    return 'W/"%s"' % hashlib.sha256(repr(listed).encode()).hexdigest()[:16]


def job_tag(job, windows):
    """A weak ETag of one job's report: it changes when the job's generation rises (its
    parts moved, or its rates were planned again), its lease is renewed or the jobs'
    windows (`windows`: JobPhases.version) move."""
    version = (job.id, job.generation, job.effective_round, job.request["ttl_s"], windows)
    return 'W/"%s"' % hashlib.sha256(repr(version).encode()).hexdigest()[:16]


def log_admitted(job):
    LOG.info("job %d: %d workers, %d bytes, shards on %s, trees %s, plan %d; predicted "
             "%.3f s a round (bound %.3f s)", job.id, len(job.request["workers"]),
             job.request["model_bytes"], ",".join(job.round.pss), job.tree_ids, job.plan_id,
             job.round.predicted_s, job.round.bound_s)


def plan_request(job):
    """The INA plan request of a job's gradients: to its shards' hosts, on what its
    trees leave, under the policy it named (else the planner's, as the plans service
    knows it)."""
    pss, request = job.round.pss, job.request
    body = {"job": "job-%d" % job.id, "workers": request["workers"],
            "ps": pss if len(pss) > 1 else pss[0],
            "policy": request.get("gradient_policy") or (
                "equal-split" if len(pss) > 1 else "grid"),
            "gradient_mb": gradient_mbit(request, len(pss)) / 8}
    if not request["aggregation"]:
        body["aggregators"] = []
    return body
