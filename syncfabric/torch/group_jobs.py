"""A process group's jobs (backend.py): its all-reduce job, and beside it, taking turns
with it, a gather job for its all-gathers and a scatter job for its reduce-scatters
(gather_rounds.py, scatter_rounds.py), each made at the first call of its kind of
min_bytes or more once the all-reduce job is made. The group's calls run one after
another, so the fabric books the three once (services/turn_taking.py). A kind whose
job the controller refuses, or lays out otherwise than in rows, goes on through the
all-reduce job's rounds, on every rank alike, and rank 0 logs why once.
"""

import logging

from syncfabric.hosts.jobs.job_layout import JobError, JobLayout
from syncfabric.hosts.packets.wire import data_mtu
from syncfabric.torch.gather_rounds import GatherRounds
from syncfabric.torch.rank_rows import rows_round_floats
from syncfabric.torch.registration import (FabricHookError, agree_on_job, close_and_release,
                                           open_worker, release_at_end)
from syncfabric.torch.scatter_rounds import ScatterRounds

LOG = logging.getLogger("syncfabric.torch")
GATHER, SCATTER = "gather", "scatter"
ROWS = {GATHER: GatherRounds, SCATTER: ScatterRounds}
# what POST /jobs asks for each kind: a scatter job's rows need shards that no
# aggregator's legs cut (rank_rows.RankRows)
REQUESTS = {GATHER: {"gather": True}, SCATTER: {"scatter": True, "aggregation": False}}
CALLS = {GATHER: "all-gathers", SCATTER: "reduce-scatters"}
SIDE_OPTIONS = ("mtu", "ttl_s")   # of FabricOptions.job_options, those these jobs take


class GroupJob:
    """A group's job and this rank's worker of it, released with the group
    (registration.release_at_end calls close()); `rows`: a gather or scatter job's
    rank_rows.RankRows, which lays out its calls."""

    def __init__(self, job, worker, group, rows=None):
        self.job, self.worker, self.group = job, worker, group
        self.rows = rows

    def close(self):
        close_and_release(self.worker, self.job)


class SideJobs:
    """The gather and scatter jobs of process group `group` (a FabricProcessGroup), the
    kinds its options ask for (`wanted`: {kind: bool}); `refused`: {kind: why there is
    none}."""

    def __init__(self, group, wanted):
        self.group, self.wanted = group, wanted
        self.jobs, self.refused = {}, {}

    def job_for(self, kind, slice_floats):
        """The group's job of `kind` (GATHER or SCATTER), made now at its first call, of
        slices of slice_floats a rank; None where the options do not ask for one, the
        group has no job yet (a group whose first call is of this kind makes it in that
        one: this job takes turns with it) or this kind's was refused."""
        if not self.wanted.get(kind) or self.group.job is None or kind in self.refused:
            return None
        if kind not in self.jobs:
            self._make(kind, slice_floats)
        return self.jobs.get(kind)

    def _make(self, kind, slice_floats):
        """The group's `kind` job, its round a slice of slice_floats from each rank, taking
        turns with the group's job; or (on every rank alike) refused[kind] saying why not."""
        group = self.group
        options = {key: value for key, value in group.options.job_options.items()
                   if key in SIDE_OPTIONS}
        round_floats = rows_round_floats(group.size(), slice_floats,
                                         options.get("mtu", data_mtu()))
        options.update(REQUESTS[kind], turns_with=group.job.job.id)   # one booking for all
        try:
            job, name = agree_on_job(group.controller, group.host, round_floats,
                                     group.agreement, options)
            rows = self._rows(kind, job)
            worker = open_worker(job, name, group.agreement)
        except FabricHookError as error:
            self.refused[kind] = str(error)
            if group.rank() == 0:
                LOG.warning("%s of this process group go through its all-reduce job's rounds "
                            "(or Gloo): %s", CALLS[kind], error)
            return
        self.jobs[kind] = GroupJob(job, worker, group, rows)
        release_at_end(self.jobs[kind])
        if group.rank() == 0:
            LOG.info("process group of %d ranks: %s of %d bytes and more through %s job %d",
                     group.size(), CALLS[kind], group.options.min_bytes, kind, job.id)

    @staticmethod
    def _rows(kind, job):
        """The rows of `job` (the same on every rank); FabricHookError, the job released,
        where the controller laid it out otherwise."""
        try:
            return ROWS[kind](JobLayout(job.report))
        except (ValueError, JobError) as error:
            job.release()   # rank 0's handle releases it; the others' do nothing
            raise FabricHookError(str(error)) from None
