"""What the jobs service does every half second (no Ryu; the job app's timer calls
Jobs.follow): after a restart, take the saved jobs back once their parts are; release
the jobs whose lease ran out, that lost a part (nothing fit around a fault) or whose
daemon stopped answering; raise the generation of those whose parts moved and have
settled; credit the pairs that take turns as their parts are now (turn_taking.py); and
plan the jobs' windows (interleaving)."""

import logging

from syncfabric.errors import NotFound
from syncfabric.services.job_daemons import daemon_hosts
from syncfabric.services.job_parts import parts_of, restore_jobs, settled
from syncfabric.services.turn_taking import follow_turns

LOG = logging.getLogger("syncfabric.jobs")


def follow_jobs(jobs, now):
    """One pass of the timer over the jobs service `jobs` at `now`."""
    if jobs.saved is not None and jobs.trees.generation == jobs.plans.generation \
            == jobs.fabric.generation:
        restore_jobs(jobs, jobs.saved, now)
        jobs.saved = None
    for job in [j for j in jobs.jobs.values() if j.installed]:
        if job.expires_at is not None and job.expires_at <= now:
            LOG.info("job %d: lease expired", job.id)
            jobs.drop(job, now, "lease", "its lease ran out")
            continue
        try:
            parts = parts_of(job, jobs.trees, jobs.plans, now)
        except NotFound:
            LOG.warning("job %d lost a part (nothing fits around a fault): released", job.id)
            jobs.drop(job, now, "reroute", "it lost a part: nothing fit around a fault")
            continue
        silent = jobs.daemons.silent(job, daemon_hosts(job, jobs.plans, now), now)
        if silent is not None:
            LOG.warning("job %d: the daemon on %s stopped answering: released", job.id, silent)
            jobs.drop(job, now, "daemon", "daemon on %s stopped answering" % silent)
            continue
        if parts != job.parts_seen and settled(job, jobs.trees, jobs.plans,
                                               jobs.fabric.down_links):
            job.generation, job.parts_seen = job.generation + 1, parts
            jobs.remember(now)
            LOG.info("job %d: its trees and plan moved; generation %d", job.id, job.generation)
    follow_turns(jobs, now)
    jobs.tenants.plan_phases(now)
