"""Jobs' communication windows when the fabric interleaves them (PUT /fabric/policy
{"interleave": true}; no Ryu).

Every FOLLOW_INTERVAL_S (apps/job_controller.py) the iterations of the jobs whose
workers run, as they say them (services/job_rounds.py; a round no longer than the
controller predicts alone, PREDICTION_SLACK more), and their fractions of each link
and aggregator at their rates alone go to the phase solver
(decisions/phase_schedule.py). Its windows are kept while every job's iteration stays
within REPLAN_CHANGE of the one they were planned from, so that workers see them change
rarely; planned again, a job keeps its place in the period where it can. A job's report carries its
window: `period_s` and `phase_offset_s` (its rounds start at offset + k x period, on the
hosts' clock, time.time(): hosts keep it with NTP), `window_s` (how long its rounds
may borrow from their window's start: its round and PERIOD_MARGIN more, so that one
that overruns keeps to its floor in the next job's window) and `window_mbps` (its rate
alone, what the solver placed it at: its rounds borrow up to it from their window's
start, rather than probe for it while the others keep to their windows; where the
rounds of jobs that share a resource were placed to meet, less, so that together they
fill it to SHARED_FILL at most: phase_schedule.shared_scale), all null when
it has none (the fabric does not interleave, it has not said its iteration yet, it
conflicts with no other job, or its group's rounds, at the rates at which they must
meet, would outrun the period). In its window, a job may borrow into an aggregator what
the jobs whose windows meet its own leave of it (co_active).
"""

import logging

from syncfabric.decisions.fair_shares import fair_rates
from syncfabric.decisions.phase_schedule import (apart, resource_totals, schedule,
                                                 window_length_s)
from syncfabric.services.job_shares import capacities

LOG = logging.getLogger("syncfabric.jobs")
REPLAN_CHANGE = 0.1   # a job's iteration moved this much (a fraction): windows planned again
PREDICTION_SLACK = 1.25   # a round alone, as predicted, may take this much longer
BUSIEST_LOGGED = 3   # a job that runs freely: its shared resources logged, the fullest first
NO_WINDOW = {"period_s": None, "phase_offset_s": None, "window_s": None, "window_mbps": None}


class JobPhases:
    """The windows of the jobs (services/jobs.Jobs), planned by plan() under interleaving."""

    def __init__(self, jobs):
        self.jobs = jobs
        self.windows = {}        # job id -> phase_schedule.Window
        self.planned_from = {}   # job id -> the Iteration its windows were planned from
        self.rates = {}          # job id -> its window's rate (Mbit/s) when last planned
        self.plans_made = 0      # counts the windows planned or cleared (version)

    def report(self, job):
        window = self.windows.get(job.id)
        if window is None:
            return dict(NO_WINDOW)
        return {"period_s": round(window.period_s, 6),
                "phase_offset_s": round(window.phase_offset_s, 6),
                "window_s": round(window_length_s(window), 6),
                "window_mbps": round(self.rates[job.id], 3)}

    def co_active(self, job_id, others):
        """Of the job ids `others`, those whose rounds may run while job `job_id`'s do:
        every one, unless both have windows in one period that do not meet."""
        mine = self.windows.get(job_id)
        return [other for other in others
                if mine is None or not apart(mine, self.windows.get(other))]

    def version(self):
        """What of the windows a job's ETag stands for: every job's, as what a job may
        borrow into an aggregator in its own depends on whose windows meet it."""
        return self.plans_made

    def clear(self):
        if self.windows:
            LOG.info("interleaving off: no job has a window")
            self.plans_made += 1
        self.windows, self.planned_from, self.rates = {}, {}, {}

    def plan(self, live, now):
        """Plan the windows again if the jobs that said their iterations, or an iteration,
        changed; live: {job id: (rate, Demand)} of the installed jobs."""
        room = capacities(self.jobs.trees.book.view)
        iterations, usage, alones = {}, {}, {}
        for job_id, (_rate, demand) in live.items():
            job, alone = self.jobs.jobs[job_id], solo_rate_mbps(room, demand)
            if alone <= 0:   # a resource of it holds nothing (a link down): no round alone
                continue
            predicted_s = job.round.predicted_s * job.round.gradients.f / alone
            iteration = job.rounds.iteration(now, predicted_s * PREDICTION_SLACK)
            if iteration is not None:
                iterations[job_id] = iteration
                usage[job_id] = solo_usage(room, demand, alone)
                alones[job_id] = alone
        if not moved(self.planned_from, iterations):
            return
        self.planned_from = iterations
        self.windows = schedule(iterations, usage, self.windows)
        self.rates = {job_id: alones[job_id] * window.rate_scale
                      for job_id, window in self.windows.items()}
        self.plans_made += 1
        log_plan(self.windows, self.rates, iterations, usage)


def log_plan(windows, rates, iterations, usage):
    """Log each job's window, and for each job that runs freely the resources it shares
    with another job, the fullest first: its fraction of each alone, and all jobs'
    together (an unshared link its rate fills says nothing about why it has no window)."""
    for job_id, window in sorted(windows.items()):
        LOG.info("job %d: window of %.3f s every %.3f s from %.3f s at %.3f Mbit/s "
                 "(rounds of %.3f s, iterations of %.3f s)", job_id, window.comm_s,
                 window.period_s, window.phase_offset_s, rates[job_id],
                 iterations[job_id].comm_s, iterations[job_id].iteration_s)
    free = sorted(set(iterations) - set(windows))
    if free:
        LOG.info("jobs %s: no window (they conflict with no job, or their group's rounds "
                 "do not fit in its iterations, or would outrun its period at the rates "
                 "at which they must meet); they run freely", free)
    totals = resource_totals(usage)
    for job_id in free:
        shared = {resource: (fraction, totals[resource])
                  for resource, fraction in usage[job_id].items()
                  if any(resource in usage[other] for other in usage if other != job_id)}
        busiest = sorted(shared.items(), key=lambda item: -item[1][0])[:BUSIEST_LOGGED]
        LOG.info("job %d runs freely: rounds of %.3f s, iterations of %.3f s; alone it "
                 "takes %s", job_id, iterations[job_id].comm_s, iterations[job_id].iteration_s,
                 ", ".join("%.2f of %s (all jobs %.2f)" % (fraction, resource, together)
                           for resource, (fraction, together) in busiest)
                 or "nothing another job uses")


def moved(planned_from, iterations):
    """Whether the jobs differ, or an iteration moved by more than REPLAN_CHANGE."""
    if set(planned_from) != set(iterations):
        return True
    return any(abs(iterations[i].comm_s - planned_from[i].comm_s) > REPLAN_CHANGE * planned_from[i].comm_s
               or abs(iterations[i].iteration_s - planned_from[i].iteration_s)
               > REPLAN_CHANGE * planned_from[i].iteration_s
               for i in iterations)


def solo_rate_mbps(room, demand):
    """A job's rate alone on the fabric (room: {resource: Mbit/s}; demand:
    fair_shares.Demand): the fair rate of it as the only job."""
    return fair_rates(room, {"alone": demand})[0]["alone"]


def solo_usage(room, demand, alone):
    """{resource: fraction of it the job takes at its rate alone, `alone` Mbit/s}."""
    return {resource: alone * per_mbps / room[resource]
            for resource, per_mbps in demand.per_mbps.items()
            if per_mbps > 0 and room.get(resource, 0.0) > 0}
