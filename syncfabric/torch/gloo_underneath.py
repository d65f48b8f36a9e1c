"""A process group of Python's with Gloo underneath (GlooUnderneath): the fabric's group
(backend.py) overrides the collectives the fabric carries; everything else is Gloo's.

Each collective it leaves to Gloo is called through the Gloo backend's own Python
binding, which lets go of the GIL while Gloo waits. Left to ProcessGroup's default
path, a call from a Python subclass held the GIL in Gloo's barrier, while Gloo's thread,
holding the lock that barrier waits for, freed a finished all-gather's tensors, which
needs the GIL: every rank hung (DDP over the backend at step 20, and PyTorch's own
object-collective and barrier tests now and then)."""

import torch
import torch.distributed as dist
from torch.distributed import ProcessGroupGloo


class GlooUnderneath(dist.ProcessGroup):
    """The ranks of `common` (torch's _DistributedBackendOptions) as a ProcessGroup, with
    a Gloo group of them registered for CPU tensors (`gloo`). `broken`: why the group
    refuses every call (None while it does not); `counts`: calls by the way they went."""

    def __init__(self, common):
        super().__init__(common.group_rank, common.group_size)
        gloo = ProcessGroupGloo(common.store, common.group_rank, common.group_size,
                                common.timeout)
        gloo.options.global_ranks_in_group = common.global_ranks_in_group
        gloo.options.group_name = common.group_id
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, gloo)
        self.gloo = gloo
        self.broken = None
        self.counts = {"fabric": 0, "gloo": 0}

    def refuse_if_broken(self):
        """RuntimeError, saying why, if the group is broken: no call goes anywhere."""
        if self.broken is not None:
            raise RuntimeError("process group over the fabric failed before: %s" % self.broken)

    def over_gloo(self, call, *args, **kwargs):
        """Gloo's call(*args, **kwargs), counted; RuntimeError at once if the group is
        broken."""
        self.refuse_if_broken()
        self.counts["gloo"] += 1
        return call(*args, **kwargs)

    def barrier(self, *args, **kwargs):
        return self.over_gloo(self.gloo.barrier, *args, **kwargs)

    def gather(self, *args, **kwargs):
        return self.over_gloo(self.gloo.gather, *args, **kwargs)

    def scatter(self, *args, **kwargs):
        return self.over_gloo(self.gloo.scatter, *args, **kwargs)

    def reduce(self, *args, **kwargs):
        return self.over_gloo(self.gloo.reduce, *args, **kwargs)

    def alltoall(self, *args, **kwargs):
        return self.over_gloo(self.gloo.alltoall, *args, **kwargs)

    def alltoall_base(self, *args, **kwargs):
        return self.over_gloo(self.gloo.alltoall_base, *args, **kwargs)

    def allgather_coalesced(self, *args, **kwargs):
        return self.over_gloo(self.gloo.allgather_coalesced, *args, **kwargs)

    def send(self, *args, **kwargs):
        return self.over_gloo(self.gloo.send, *args, **kwargs)

    def recv(self, *args, **kwargs):
        return self.over_gloo(self.gloo.recv, *args, **kwargs)

    def recv_anysource(self, *args, **kwargs):
        return self.over_gloo(self.gloo.recv_anysource, *args, **kwargs)

    def gloo_all_gather_single(self, output, input, opts):   # noqa: A002 (torch's names)
        """all_gather_into_tensor over Gloo: its list form, into the output's slices."""
        return self.gloo.allgather([list(output.chunk(self.size()))], [input], opts)

    def gloo_reduce_scatter_single(self, output, input, opts):   # noqa: A002
        """reduce_scatter_tensor over Gloo as Gloo's own is: an all-reduce of a copy of
        the input, this rank's slice of it copied out (Gloo's list form, its
        reduce-scatter algorithm, took 3.1x as long among 8 ranks at 128 KiB)."""
        summed = input.clone()
        options = dist.AllreduceOptions()
        options.reduceOp, options.timeout = opts.reduceOp, opts.timeout
        work = self.gloo.allreduce([summed], options)
        return CopiedWork(work, summed.chunk(self.size())[self.rank()], output)


class CopiedWork(dist.Work):
    """A Work whose result is copied out once it ends: `source` (written by `work`) into
    `output`, by wait() or before its Future ends with [output]."""

    def __init__(self, work, source, output):
        super().__init__()
        self.work, self.source, self.output = work, source, output

    def wait(self, timeout=None):
        self.work.wait()
        self.output.copy_(self.source)
        return True

    def get_future(self):
        def copied(_done):
            self.output.copy_(self.source)
            return [self.output]
        return self.work.get_future().then(copied)

    def is_completed(self):
        return self.work.is_completed()
