"""torch.distributed's "fabric" backend: a training program runs over the fabric with
no other change than its backend's name.

    import syncfabric.torch                     # registers "fabric" (and "cpu:fabric")
    dist.init_process_group("fabric")           # torchrun's environment, as for Gloo

Each process group is a ProcessGroup of its own (FabricProcessGroup) over a Gloo group
of the same ranks. Its first collective that the fabric can carry (eligible:
collectives.py) makes the group's job: rank 0 asks the controller for one of the
ranks' hosts, every rank opens its worker, and from then on every eligible all-reduce,
broadcast, all-gather and reduce-scatter goes through the job's rounds
(FabricWorker.allreduce_async: any length, in the order they are called). All-gathers
and reduce-scatters of min_bytes and more, once the group's job is made, go through a
gather job and a scatter job of the group instead (FabricOptions.gather_job and
scatter_job, on by default; group_jobs.py: a ring's bytes), each made at the first of
its calls and taking turns with the group's job, so they may end before or after the
calls around them. Everything
else goes to Gloo: other collectives, other dtypes and ops, tensors below min_bytes (but
where they go on in a round already begun: _min_bytes). If
the controller refuses the job, or any rank cannot join it, every rank leaves the
group to Gloo, and rank 0 logs why once. Every rank decides alike, from the call's
arguments and the calls before it; `counts` says how many calls went which way.

Where the controller is and which fabric host each rank is: FabricOptions, passed as
init_process_group's pg_options (a group made without them takes the default group's),
or by default the environment (SYNCFABRIC_CONTROLLER; SYNCFABRIC_REST_TOKEN for the
controller's token; SYNCFABRIC_HOSTS, each global rank's host, else the host of
GLOO_SOCKET_IFNAME's address, as fabric_hook finds it; SYNCFABRIC_MIN_BYTES).
docs/pytorch.md says more.
"""

import logging
import os
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.distributed as dist

from syncfabric.torch.agreement import StoreAgreement
from syncfabric.torch.collectives import (allgather_call, allgather_eligible, allreduce_call,
                                          broadcast_call, reduce_scatter_call,
                                          reduce_scatter_eligible, scaling)
from syncfabric.torch.gloo_underneath import GlooUnderneath
from syncfabric.torch.group_jobs import GATHER, SCATTER, GroupJob, SideJobs
from syncfabric.torch.registration import (FabricHookError, agree_on_job, open_worker,
                                           release_at_end)
from syncfabric.torch.works import CoalescedWork, FabricWork

LOG = logging.getLogger("syncfabric.torch")
NAME = "fabric"
CONTROLLER_ENV = "SYNCFABRIC_CONTROLLER"
HOSTS_ENV = "SYNCFABRIC_HOSTS"          # each global rank's fabric host, in rank order
MIN_BYTES_ENV = "SYNCFABRIC_MIN_BYTES"  # FabricOptions.min_bytes's default
GATHER_JOB_ENV = "SYNCFABRIC_GATHER_JOB"   # "0": FabricOptions.gather_job False by default
SCATTER_JOB_ENV = "SYNCFABRIC_SCATTER_JOB"   # "0": FabricOptions.scatter_job False by default
# below this, a collective goes to Gloo (a round's fixed costs outweigh what the
# fabric saves): the largest crossover experiments.collectives measured (its
# --crossover-sizes: 8 ranks' all-reduce and reduce-scatter, docs/pytorch.md)
MIN_BYTES = 256 * 2 ** 10
FEWEST_ROUND_BYTES = 256 * 2 ** 10   # a job's shortest round, whatever its first call
ROUND_SLACK = 64   # a round is 1/ROUND_SLACK longer than the first call (_make_job)


@dataclass
class FabricOptions:
    """What a group needs to reach the fabric: the controller's URL (None: the
    environment's SYNCFABRIC_CONTROLLER; neither: every collective goes to Gloo), this
    rank's fabric host (None: its global rank's in SYNCFABRIC_HOSTS, else
    GLOO_SOCKET_IFNAME's), a round's bytes (None: the first eligible collective's, DDP's
    broadcast of the model), the fewest bytes (as float32) of a collective the fabric
    carries (SYNCFABRIC_MIN_BYTES, else MIN_BYTES), POST /jobs's options (shards,
    placement, aggregation, mtu, ttl_s), and whether all-gathers and reduce-scatters go
    through a gather job and a scatter job of the group's (by default, unless
    SYNCFABRIC_GATHER_JOB=0 or SYNCFABRIC_SCATTER_JOB=0; they take turns with the
    group's job, one booking for all: docs/pytorch.md)."""
    controller: Optional[str] = None
    host: Optional[str] = None
    capacity_bytes: Optional[int] = None
    min_bytes: int = field(default_factory=lambda: int(os.environ.get(MIN_BYTES_ENV,
                                                                      MIN_BYTES)))
    job_options: dict = field(default_factory=dict)
    gather_job: bool = field(default_factory=lambda: os.environ.get(GATHER_JOB_ENV) != "0")
    scatter_job: bool = field(default_factory=lambda: os.environ.get(SCATTER_JOB_ENV) != "0")


class FabricProcessGroup(GlooUnderneath):
    """A process group whose eligible collectives go through the fabric (module doc);
    `counts` says how many calls went which way ({"fabric": n, "gloo": n})."""

    def __init__(self, common, options):
        super().__init__(common)
        self.options = options
        # its ranks agree on its job over its store, not its own collectives (agreement.py)
        self.agreement = StoreAgreement(common.store, common.group_rank, common.group_size)
        self.controller = options.controller or os.environ.get(CONTROLLER_ENV)
        self.host = options.host or host_by_environment(common)
        self.job, self.gloo_only = None, None   # the latter: why the fabric is not used
        # all-gathers' and reduce-scatters' own jobs (group_jobs.py), and why not if refused
        self.side_jobs = SideJobs(self, {GATHER: options.gather_job,
                                         SCATTER: options.scatter_job})
        if not self.controller:
            self.gloo_only = "no controller: set %s or FabricOptions.controller" % CONTROLLER_ENV

    def getBackendName(self):
        return NAME

    @property
    def gather_refused(self):
        """Why the group has no gather job, if it was refused (None: it has, or not yet)."""
        return self.side_jobs.refused.get(GATHER)

    @property
    def scatter_refused(self):
        """Why the group has no scatter job, if it was refused (None: it has, or not yet)."""
        return self.side_jobs.refused.get(SCATTER)

    def allreduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceOptions()
        call = allreduce_call(tensors, opts.reduceOp, self.size(), self._min_bytes())
        return self._through(call, lambda: gloo_allreduce_premultiplied(self.gloo.allreduce,
                                                                        tensors, opts))

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceCoalescedOptions()
        call = allreduce_call(tensors, opts.reduceOp, self.size(), self._min_bytes(),
                              coalesced=True)
        return self._through(call, lambda: gloo_allreduce_premultiplied(
            self.gloo.allreduce_coalesced, tensors, opts))

    def broadcast(self, tensors, opts=None):
        opts = opts if opts is not None else dist.BroadcastOptions()
        call = broadcast_call(tensors, opts.rootRank, self.rank(), self._min_bytes())
        return self._through(call, lambda: self.gloo.broadcast(tensors, opts))

    def allgather(self, output_tensors, input_tensors, opts=None):
        opts = opts if opts is not None else dist.AllgatherOptions()
        call = None
        if len(output_tensors) == 1 and len(input_tensors) == 1:
            call = self._allgather_call(output_tensors[0], input_tensors[0])
        return self._through(call, lambda: self.gloo.allgather(output_tensors, input_tensors,
                                                                opts))

    def all_gather_single(self, output, input, opts=None):   # noqa: A002 (torch's names)
        opts = opts if opts is not None else dist.AllgatherOptions()
        call = self._allgather_call([output], input)
        return self._through(call, lambda: self.gloo_all_gather_single(output, input, opts))

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        call = None
        if len(output_tensors) == 1 and len(input_tensors) == 1:
            call = self._reduce_scatter_call(output_tensors[0], input_tensors[0], opts.reduceOp)
        return self._through(call, lambda: self.gloo.reduce_scatter(output_tensors,
                                                                     input_tensors, opts))

    def reduce_scatter_single(self, output, input, opts=None):   # noqa: A002
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        call = self._reduce_scatter_call(output, [input], opts.reduceOp)
        return self._through(call, lambda: self.gloo_reduce_scatter_single(output, input,
                                                                            opts))

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        """Functional collectives' all_gather_into_tensor (FSDP2's): each pair as
        all_gather_single (left to ProcessGroup's default, Gloo's held the GIL: hung)."""
        opts = opts if opts is not None else dist.AllgatherOptions()
        return CoalescedWork([self.all_gather_single(output, input, opts)
                              for output, input in zip(outputs, inputs)], outputs)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        """Functional collectives' reduce_scatter_tensor: each pair as
        reduce_scatter_single."""
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        return CoalescedWork([self.reduce_scatter_single(output, input, opts)
                              for output, input in zip(outputs, inputs)], outputs)

    def _min_bytes(self):
        """The fewest bytes of a collective the fabric carries: min_bytes, or none while
        the job's round being filled has begun. The calls after a large one (DDP's step:
        its last bucket, the first layers', is often small) then go on in its round, which
        a Gloo call between would hold back and cut the step in two. Every rank made the
        same calls before, so every rank decides alike."""
        if self.job is not None and self.job.worker.stream.round_begun():
            return 0
        return self.options.min_bytes

    def _through(self, call, over_gloo):
        """The Work of `call` (collectives.RoundCall, or None where the call is not
        eligible) through the job's rounds (a call already made for the gather or scatter
        job's: through those), or of over_gloo() where it goes to Gloo; RuntimeError at once
        if the group's fabric failed before."""
        self.refuse_if_broken()
        if call is not None and call.job is not None:
            self.counts["fabric"] += 1
            return self._round_work(call, call.job)
        if call is not None and self.gloo_only is None and self.job is None:
            self._make_job(len(call.values))
        if call is None or self.job is None:
            return self.over_gloo(over_gloo)
        self.counts["fabric"] += 1
        return self._round_work(call, self.job)

    def _allgather_call(self, outputs, tensor):
        """An all-gather's RoundCall: a call of the group's gather job (its `job` set)
        where the call is eligible on min_bytes alone and the group has that job
        (SideJobs.job_for); else through the all-reduce job's rounds
        (collectives.allgather_call), or None for Gloo."""
        self.refuse_if_broken()   # before a broken group would ask for a gather job
        if allgather_eligible(outputs, tensor, self.size(), self.options.min_bytes):
            gather_job = self.side_jobs.job_for(GATHER, tensor.numel())
            if gather_job is not None:
                gathered = gather_job.rows.call(outputs, tensor, self.rank())
                gathered.job = gather_job
                return gathered
        return allgather_call(outputs, tensor, self.rank(), self.size(), self._min_bytes())

    def _reduce_scatter_call(self, output, inputs, op):
        """A reduce-scatter's RoundCall: a call of the group's scatter job where the call
        is eligible on min_bytes alone and the group has that job; else through the
        all-reduce job's rounds (collectives.reduce_scatter_call), or None for Gloo."""
        self.refuse_if_broken()   # before a broken group would ask for a scatter job
        if reduce_scatter_eligible(output, inputs, op, self.size(),
                                   self.options.min_bytes) is not None:
            scatter_job = self.side_jobs.job_for(SCATTER, output.numel())
            if scatter_job is not None:
                scattered = scatter_job.rows.call(output, inputs, op, self.rank())
                scattered.job = scatter_job
                return scattered
        return reduce_scatter_call(output, inputs, op, self.rank(), self.size(),
                                   self._min_bytes())

    def _make_job(self, first_floats):
        """The group's job, or (on every rank alike) gloo_only saying why not. Its round
        is capacity_bytes, or by default the first call's floats and a 64th more
        (ROUND_SLACK): a call streams through the rounds from where the last one ended, so
        one as long as a round (DDP's step, as long as the broadcast of its model)
        spreads over every shard, where a round much longer than the calls would leave
        all but one shard idle for each. The slack holds the zeros that pad each of the
        step's buckets to a fragment's edge, so that each step is a round of its own
        (call_stream.py). At least FEWEST_ROUND_BYTES: every round has fixed costs."""
        floats = self.options.capacity_bytes // 4 if self.options.capacity_bytes \
            else max(first_floats + first_floats // ROUND_SLACK, FEWEST_ROUND_BYTES // 4)
        try:
            job, name = agree_on_job(self.controller, self.host, floats,
                                     self.agreement, self.options.job_options)
            self.job = GroupJob(job, open_worker(job, name, self.agreement), self)
        except FabricHookError as error:
            self.gloo_only = str(error)
            if self.rank() == 0:
                LOG.warning("every collective of this process group goes to Gloo: %s", error)
            return
        release_at_end(self.job)
        if self.rank() == 0:
            LOG.info("process group of %d ranks: collectives of %d bytes and more through "
                     "job %d, the rest over Gloo", self.size(), self.options.min_bytes,
                     job.id)

    def _round_work(self, call, group_job):
        """The Work of `call` through the rounds of `group_job` (a GroupJob): its outputs
        are written as the rounds bring the sums back."""
        work = FabricWork(torch.futures.Future())
        summed = group_job.worker.allreduce_async(call.values)

        def settle(done):
            try:
                call.place(torch.from_numpy(done.result()))
            except Exception as error:   # a failed round: every later call raises at once
                self.broken, work.error = str(error), error
                LOG.error("process group over the fabric: %s; its collectives raise from now "
                          "on", error)
            work.future.set_result(call.outputs)
        summed.add_done_callback(settle)
        return work


def host_by_environment(common):
    """The fabric host SYNCFABRIC_HOSTS names for this rank (its global rank's), or None
    (then GLOO_SOCKET_IFNAME's address says)."""
    hosts = [name for name in os.environ.get(HOSTS_ENV, "").split(",") if name]
    ranks = common.global_ranks_in_group   # [] for the default group: its ranks are global
    rank = ranks[common.group_rank] if ranks else common.group_rank
    if not hosts:
        return None
    if rank >= len(hosts):
        raise ValueError("%s names %d hosts, none for rank %d: name one host per rank, in "
                         "rank order" % (HOSTS_ENV, len(hosts), rank))
    return hosts[rank]


def gloo_allreduce_premultiplied(gloo_allreduce, tensors, opts):
    """gloo_allreduce(tensors, opts): Gloo's all-reduce, which lacks PREMUL_SUM. Such a
    call's tensors are multiplied by its factor in place (an all-reduce's inputs are its
    outputs) and its op made SUM, on a copy of opts; if Gloo then refuses the call
    (tensors of two sizes, say), the tensors are put back as they were: a refused call
    changes nothing.
    Any other call goes as it is."""
    if opts.reduceOp != dist.ReduceOp.PREMUL_SUM or scaling(opts.reduceOp, 1) is None:
        return gloo_allreduce(tensors, opts)
    factor, _divide = scaling(opts.reduceOp, 1)
    summed = type(opts)()
    summed.reduceOp, summed.timeout = dist.ReduceOp.SUM, opts.timeout
    kept = [tensor.clone() for tensor in tensors]
    try:
        for tensor in tensors:
            tensor.mul_(factor)
        return gloo_allreduce(tensors, summed)
    except BaseException:
        for tensor, before in zip(tensors, kept):
            tensor.copy_(before)
        raise


def create_group(common, options):
    """Backend.register_backend's creator (extended_api): the group of `common`'s ranks
    (torch's _DistributedBackendOptions), with init_process_group's pg_options."""
    if options is not None and not isinstance(options, FabricOptions):
        raise TypeError("the fabric backend's pg_options are a syncfabric.torch.FabricOptions, "
                        "not %s" % type(options).__name__)
    return FabricProcessGroup(common, options or inherited_options())


def inherited_options():
    """A new group's options where its caller gave none (new_group, a DeviceMesh's
    groups): the default group's, if it is the fabric's (the same process: the same
    controller and host), else the environment's."""
    world = dist.group.WORLD if dist.is_initialized() else None
    return world.options if isinstance(world, FabricProcessGroup) else FabricOptions()


def register():
    """Make "fabric" a torch.distributed backend of CPU tensors (once per process)."""
    if getattr(dist.Backend, NAME.upper(), None) is None:
        dist.Backend.register_backend(NAME, create_group, extended_api=True, devices=["cpu"])


__all__ = ["FabricOptions", "FabricProcessGroup", "register"]
