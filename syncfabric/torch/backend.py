"""torch.distributed's "fabric" backend: a training program runs over the fabric with
no other change than its backend's name.

    import syncfabric.torch                     # registers "fabric" (and "cpu:fabric")
    dist.init_process_group("fabric")           # torchrun's environment, as for Gloo

Each process group is a ProcessGroup of its own (FabricProcessGroup) over a Gloo group
of the same ranks. Its first all-reduce that the fabric can carry (eligible) makes the
group's job: rank 0 asks the controller for one of the ranks' hosts, every rank opens
its worker, and from then on every eligible all-reduce goes through the job's rounds
(FabricWorker.allreduce_async: any length). Everything else goes to Gloo: other
collectives, other dtypes and ops, tensors below min_bytes. If the controller refuses
the job, or any rank cannot join it, every rank leaves the group to Gloo, and rank 0
logs why once. Every rank decides alike, from the call's arguments alone.

Where the controller is and which fabric host each rank is: FabricOptions, passed as
init_process_group's pg_options, or by default the environment (SYNCFABRIC_CONTROLLER;
SYNCFABRIC_REST_TOKEN for the controller's token; the host of GLOO_SOCKET_IFNAME's
address, as fabric_hook finds it). docs/pytorch.md says more.
"""

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroupGloo

from syncfabric.torch.agreement import StoreAgreement
from syncfabric.torch.registration import (WIRE_DTYPES, FabricHookError, agree_on_job,
                                           open_worker, release_at_end)

LOG = logging.getLogger("syncfabric.torch")
NAME = "fabric"
CONTROLLER_ENV = "SYNCFABRIC_CONTROLLER"
CAPACITY_BYTES = 25 * 2 ** 20   # a job's round: DDP's default bucket (bucket_cap_mb=25)
# below this, an all-reduce goes to Gloo (a round's fixed costs outweigh what the
# fabric saves); provisional until experiments.collectives measures the crossover
MIN_BYTES = 256 * 2 ** 10
SUMMED_OPS = {"SUM": False, "AVG": True}   # op -> whether the sum is divided by the size


@dataclass
class FabricOptions:
    """What a group needs to reach the fabric: the controller's URL (None: the
    environment's SYNCFABRIC_CONTROLLER; neither: every collective goes to Gloo), this
    rank's fabric host (None: GLOO_SOCKET_IFNAME's), a round's bytes, the smallest
    all-reduce the fabric carries, and POST /jobs's options (shards, placement,
    aggregation, mtu, ttl_s)."""
    controller: Optional[str] = None
    host: Optional[str] = None
    capacity_bytes: int = CAPACITY_BYTES
    min_bytes: int = MIN_BYTES
    job_options: dict = field(default_factory=dict)


class GroupJob:
    """A group's job and this rank's worker of it, released with the group
    (registration.release_at_end calls close())."""

    def __init__(self, job, worker, group):
        self.job, self.worker, self.group = job, worker, group

    def close(self):
        try:
            self.worker.close()
        finally:
            self.job.release()


class FabricWork(dist.Work):
    """An all-reduce through the fabric as torch.distributed waits for it. A failed
    round's error is raised by wait() (torch's own Work made from a Future would return
    as if done), not carried by the Future: DDP with no hook died of SIGSEGV on a Future
    that ended in an error. Its Future then ends with the tensor left as it was, and
    the group's next all-reduce raises the error at once."""

    def __init__(self, future):
        super().__init__()
        self.future = future   # a torch Future of [the tensor]
        self.error = None      # the round's, if it failed

    def wait(self, timeout=None):
        self.future.wait()
        if self.error is not None:
            raise self.error
        return True

    def get_future(self):
        return self.future

    def is_completed(self):
        return self.future.done()


class FabricProcessGroup(dist.ProcessGroup):
    """A process group whose eligible all-reduces go through the fabric (module doc);
    `counts` says how many calls went which way ({"fabric": n, "gloo": n})."""

    def __init__(self, common, options):
        super().__init__(common.group_rank, common.group_size)
        gloo = ProcessGroupGloo(common.store, common.group_rank, common.group_size,
                                common.timeout)
        gloo.options.global_ranks_in_group = common.global_ranks_in_group
        gloo.options.group_name = common.group_id
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, gloo)
        self.gloo, self.options = gloo, options
        # its ranks agree on its job over its store, not its own collectives (agreement.py)
        self.agreement = StoreAgreement(common.store, common.group_rank, common.group_size)
        self.controller = options.controller or os.environ.get(CONTROLLER_ENV)
        self.job, self.gloo_only, self.broken = None, None, None   # the last two: why
        if not self.controller:
            self.gloo_only = "no controller: set %s or FabricOptions.controller" % CONTROLLER_ENV
        self.counts = Counter()

    def getBackendName(self):
        return NAME

    def allreduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceOptions()
        divide = self._over_fabric(tensors, opts.reduceOp)
        if divide is None:
            self.counts["gloo"] += 1
            return self.gloo.allreduce(tensors, opts)
        self.counts["fabric"] += 1
        return self._fabric_allreduce(tensors[0], divide)

    def _over_fabric(self, tensors, op):
        """None if the call goes to Gloo, else whether its sum is divided by the size;
        RuntimeError if the group's fabric failed before."""
        if self.broken is not None:
            raise RuntimeError("process group over the fabric failed before: %s" % self.broken)
        divide = eligible(tensors, op, self.options.min_bytes)
        if divide is None or self.gloo_only is not None:
            return None
        if self.job is None:
            self._make_job()
        return None if self.job is None else divide

    def _make_job(self):
        """The group's job, or (on every rank alike) gloo_only saying why not."""
        floats = self.options.capacity_bytes // 4
        try:
            job, name = agree_on_job(self.controller, self.options.host, floats,
                                     self.agreement, self.options.job_options)
            self.job = GroupJob(job, open_worker(job, name, self.agreement), self)
        except FabricHookError as error:
            self.gloo_only = str(error)
            if self.rank() == 0:
                LOG.warning("every collective of this process group goes to Gloo: %s", error)
            return
        release_at_end(self.job)
        if self.rank() == 0:
            LOG.info("process group of %d ranks: all-reduces of %d bytes and more through "
                     "job %d, the rest over Gloo", self.size(), self.options.min_bytes,
                     job.id)

    def _fabric_allreduce(self, tensor, divide):
        """The Work of tensor's sum over the ranks (divided by their number if `divide`),
        written into it as the job's rounds bring it back."""
        values = tensor.detach().reshape(-1)
        if values.dtype != torch.float32:
            values = values.to(torch.float32)
        work = FabricWork(torch.futures.Future())
        summed = self.job.worker.allreduce_async(values.numpy())

        def settle(done):
            try:
                total = torch.from_numpy(done.result()).view(tensor.shape)
                if divide:
                    total = total / self.size()
                tensor.copy_(total)
            except Exception as error:   # a failed round: every later call raises at once
                self.broken, work.error = str(error), error
                LOG.error("process group over the fabric: %s; its all-reduces raise from now "
                          "on", error)
            work.future.set_result([tensor])
        summed.add_done_callback(settle)
        return work


def eligible(tensors, op, min_bytes):
    """Whether an all-reduce of `tensors` with ReduceOp `op` goes through the fabric: one
    contiguous CPU tensor of a dtype the wire carries, of min_bytes (as float32) or
    more, summed or averaged. None if not, else whether its sum is divided."""
    if len(tensors) != 1:
        return None
    tensor = tensors[0]
    if tensor.device.type != "cpu" or tensor.layout != torch.strided \
            or not tensor.is_contiguous() or tensor.dtype not in WIRE_DTYPES \
            or 4 * tensor.numel() < min_bytes:
        return None
    for name, divide in SUMMED_OPS.items():
        if op == getattr(dist.ReduceOp, name):
            return divide
    return None


def create_group(common, options):
    """Backend.register_backend's creator (extended_api): the group of `common`'s ranks
    (torch's _DistributedBackendOptions), with init_process_group's pg_options."""
    if options is not None and not isinstance(options, FabricOptions):
        raise TypeError("the fabric backend's pg_options are a syncfabric.torch.FabricOptions, "
                        "not %s" % type(options).__name__)
    return FabricProcessGroup(common, options or FabricOptions())


def register():
    """Make "fabric" a torch.distributed backend of CPU tensors (once per process)."""
    if getattr(dist.Backend, NAME.upper(), None) is None:
        dist.Backend.register_backend(NAME, create_group, extended_api=True, devices=["cpu"])


__all__ = ["FabricOptions", "FabricProcessGroup", "register"]
