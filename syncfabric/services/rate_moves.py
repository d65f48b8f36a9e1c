"""Moving live jobs to new rates, make-before-break (no Ryu): down first, each booked at
once, its hosts told through a new generation with the round it takes effect from,
and its meters tightened once its workers reached that round; then up, each booked
only if it fits, its meters loosened before its hosts are told. The decisions of
what rates come from the policy (services/tenants.py); the parts at a rate from
services/job_rates.py."""

import logging

from syncfabric.decisions.reservations import ReservationError
from syncfabric.errors import InstallFailed
from syncfabric.services.job_rates import RateChange
from syncfabric.services.turn_taking import book_turns, partner_of, takers_of

LOG = logging.getLogger("syncfabric.jobs")
CHANGE_TOLERANCE = 0.02   # a job's rate is moved only when its share differs by more
SHRINK_WAIT_S = 30.0      # longest a shrink waits for its workers to reach its round


class RateMoves:
    """Moves of the jobs service's (jobs) live jobs. wait_until(condition, timeout_s):
    as Tenants'."""

    def __init__(self, jobs, wait_until):
        self.jobs, self.wait_until = jobs, wait_until

    def move(self, targets, now, cause, shrink, grow):
        """Move the jobs whose share differs from their rate: if `shrink`, down (waiting
        for their workers), then, if `grow`, up. A job that takes turns with one of them
        moves with it, by the same factor (turn_taking.py)."""
        changes = {job_id: RateChange(self.jobs.jobs[job_id], self.jobs.trees, self.jobs.plans,
                                      rate) for job_id, rate in sorted(targets.items())
                   if job_id in self.jobs.jobs and rate > 0
                   and abs(rate - self.jobs.plans.plans[self.jobs.jobs[job_id].plan_id].result.f)
                   > CHANGE_TOLERANCE * rate}
        shrinking = [c for c in changes.values() if not c.grows]
        if shrink and shrinking:
            with self.jobs.metrics.replan_seconds.labels("shrink").time():
                self._shrink(shrinking + [taker for change in shrinking
                                          for taker in self._taker_changes(change)], now, cause)
        if grow:
            for change in [c for c in changes.values() if c.grows]:
                with self.jobs.metrics.replan_seconds.labels("grow").time():
                    if self._grow(change, now, cause):
                        for taker in self._taker_changes(change):
                            self._grow(taker, now, cause)

    def _taker_changes(self, change):
        """The RateChanges of the installed jobs that take turns with change.job, by the
        same factor."""
        changes = []
        for taker in takers_of(self.jobs, change.job):
            live = self.jobs.plans.plans.get(taker.plan_id)
            if live is not None and taker.installed:
                changes.append(RateChange(taker, self.jobs.trees, self.jobs.plans,
                                          live.result.f * change.rate / change.old_rate))
        return changes

    def _shrink(self, changes, now, cause):
        for change in changes:
            change.book()
        self._credit_turns(changes)
        for change in changes:
            change.adopt(now)
            self._publish(change, now, cause)
        jobs = [change.job for change in changes]
        if not self.wait_until(lambda at: all(self._done_with_old_rates(job, at)
                                              for job in jobs), SHRINK_WAIT_S):
            LOG.warning("jobs %s: not every worker reached the round of its new rates within "
                        "%.0f s; tightening the meters now", [j.id for j in jobs], SHRINK_WAIT_S)
        for change in changes:
            if self.jobs.jobs.get(change.job.id) is not change.job:
                continue   # released while its workers were awaited: its meters are gone
            try:
                self.jobs.trees.installer.install(change.meters(self.jobs.fabric))
            except InstallFailed as failure:   # the hosts keep to the lower rate anyway
                LOG.error("job %d: its lower meters were not confirmed (%s)", change.job.id,
                          failure)

    def _done_with_old_rates(self, job, now):
        """Whether no worker of `job` sends at its old rates: each has passed its
        effective round, or said in a read of its new generation that the rounds
        before it are back, or ended; or the job was released."""
        return self.jobs.jobs.get(job.id) is not job or job.rounds.passed(
            job.effective_round, now, job.generation)

    def _grow(self, change, now, cause):
        """Move `change` up if it fits, its meters loosened first; whether it moved. A
        job that takes turns is credited at its new loads before the check (it fits
        inside its partner's new booking), and at its old ones again if it stays."""
        if partner_of(self.jobs, change.job) is not None:
            book_turns(self.jobs, change.job, change.new_loads())
        try:
            change.book()
        except ReservationError as error:
            LOG.info("job %d stays at %.3f Mbit/s: %s", change.job.id, change.old_rate, error)
            self._credit_turns([change])
            return False
        try:
            self.jobs.trees.installer.install(change.meters(self.jobs.fabric))
        except InstallFailed as failure:
            LOG.error("job %d stays at %.3f Mbit/s: its higher meters were not confirmed "
                      "(%s)", change.job.id, change.old_rate, failure)
            change.unbook()
            self._credit_turns([change])
            return False
        change.adopt(now)
        self._publish(change, now, cause)
        return True

    def _credit_turns(self, changes):
        """The credit of every pair a job of `changes` takes turns in, as the book holds
        the pair now, once each though both of a pair moved."""
        takers = {}
        for change in changes:
            for job in [change.job, *takers_of(self.jobs, change.job)]:
                if partner_of(self.jobs, job) is not None:
                    takers[job.id] = job
        for taker in takers.values():
            book_turns(self.jobs, taker)

    def _publish(self, change, now, cause):
        """The job's hosts read its new rates, from its effective round on."""
        job = change.job
        job.generation += 1
        job.effective_round = job.rounds.effective_round(now)
        self.jobs.remember(now)
        self.jobs.metrics.replans.labels("grow" if change.grows else "shrink").inc()
        LOG.info("job %d: %.3f -> %.3f Mbit/s (%s policy, a job's %s); generation %d from "
                 "round %d", job.id, change.old_rate, change.rate, self.jobs.tenants.policy, cause,
                 job.generation, job.effective_round)

