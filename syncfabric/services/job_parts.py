"""A job's parts as their services hold them (no Ryu): their paths and revisions (what
a job's generation stands for), whether they have settled off failed links, their
release, and the saved jobs taken back after a controller restart."""

import itertools
import logging

from syncfabric.decisions.gradient_plan import crosses
from syncfabric.errors import NotFound
from syncfabric.services.job_records import Job, restored_job
from syncfabric.services.turn_taking import turns_key

LOG = logging.getLogger("syncfabric.jobs")


def parts_of(job, trees, plans, now):
    """The paths and revisions of the job's parts (NotFound if one is gone)."""
    return ([trees.show(i, now)["edges"] for i in job.tree_ids],
            plans.show(job.plan_id, now)["revision"])


def release_parts(job, trees, plans, now):
    """Release the job's credit for taking turns (first, so that the trees saved as
    they go are saved without it), plan and trees; those of a book the fabric replaced
    went with it (and their ids may name other trees now)."""
    if trees.book is not None and (job.book is None or job.book is trees.book):
        trees.book.credit(turns_key(job.id), None)
    if job.plan_id is not None:
        try:
            plans.release(job.plan_id, now)
        except NotFound:
            pass
    if job.book is None or job.book is trees.book:
        for tree_id in job.tree_ids:
            trees.release_if_booked(tree_id, now)


def settled(job, trees, plans, down_links):
    """Whether no part of the job is moving or still crosses a link that is down."""
    live = plans.plans.get(job.plan_id)
    edges = [edge for i in job.tree_ids for edge in trees.book.get(i).tree.edges]
    return (not trees.moving & set(job.tree_ids) and live is not None
            and not crosses(live.result, down_links)
            and not any(frozenset(edge) in down_links for edge in edges))


def restore_jobs(jobs, records, now):
    """Take back into the jobs service (jobs) the saved jobs whose parts all came back;
    release what is left of the others (nobody else may)."""
    ids = [r["id"] for r in records if isinstance(r.get("id"), int)]
    jobs.next_ids = itertools.count(max(ids + [next(jobs.next_ids) - 1]) + 1)   # never reused
    for record in records:
        try:
            job = restored_job(record, now)
            job.book = jobs.trees.book
            jobs.jobs[job.id], jobs.release_keys[job.id] = job, record.get("release_key")
            job.parts_seen = parts_of(job, jobs.trees, jobs.plans, now)
            LOG.info("job %d restored (generation %d)", job.id, job.generation)
        except (KeyError, TypeError, ValueError, NotFound) as error:
            LOG.error("saved job %s not restored (%s): releasing what is left of it",
                      record.get("id"), error)
            jobs.jobs.pop(record.get("id"), None)
            job_id = record["id"] if isinstance(record.get("id"), int) else 0
            release_parts(Job(job_id, {}, tree_ids=list(record.get("trees", [])),
                              plan_id=record.get("plan")), jobs.trees, jobs.plans, now)
    jobs.remember(now)
