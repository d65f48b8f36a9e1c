"""DDP's communication hook through the fabric: every gradient bucket goes into the job's
streaming round as DDP hands it over (FabricWorker.reduce_part, a step's buckets one
round, each at its place in the step's gradient), and its Future completes when the
bucket's sum is back, divided by the world size as DDP's own all-reduce does. The
backward pass goes on meanwhile.

Every rank gets the same sums, bit for bit (one shard adds each fragment and sends the
sum to all), so every rank takes the same step. float16 and bfloat16 buckets go as
float32 and come back in their dtype. A bucket whose sum is not finite (inf or NaN in
some rank's gradient: every rank sees the same sum, so every rank decides alike) is an
error, or with fallback=True is reduced again over the process group, as are buckets
of other dtypes. The step's last bucket, if its sum is finite, completes its Future
on the worker's I/O thread as the sum comes back: DDP's backward ends when it does,
and a thread of its own to wake costs milliseconds on a busy host. The rest is
settled in order by one thread (meanwhile the I/O thread goes on with the round),
so that the process group's collectives go in the same order on every rank.
"""

import gc
import logging
import queue
import threading

import torch
import torch.distributed as dist

from syncfabric.torch.agreement import GroupAgreement
from syncfabric.torch.registration import (WIRE_DTYPES, FabricHookError, agree_on_job,
                                           close_and_release, open_worker, release_at_end,
                                           where_gradients_are, wire_floats)

LOG = logging.getLogger("syncfabric.torch")

__all__ = ["fabric_hook", "FabricHookError", "FabricReducer"]


def fabric_hook(model, controller, host=None, fallback=False, process_group=None, **job_options):
    """Register the fabric's hook on a DistributedDataParallel `model` (every rank calls
    it, before the first backward); the hook's FabricReducer, or None where fallback
    leaves every bucket to DDP's own all-reduce. controller: the controller's URL;
    host: this rank's fabric host (default: GLOO_SOCKET_IFNAME's address);
    job_options: POST /jobs's shards, placement, aggregation, mtu (by default
    SYNCFABRIC_MTU's, or 1500) and ttl_s (by default LEASE_S, renewed by rank 0 while
    the model trains, so a job left behind by a crash or an absent controller goes). Raises
    FabricHookError, on every rank alike, for what cannot go through the fabric (a model
    on a GPU, a group that is not Gloo's, a dtype the wire lacks, hosts it cannot use)."""
    group = process_group if process_group is not None else model.process_group
    try:
        where_gradients_are(model, group)
        floats = wire_floats(model, fallback)
        if floats == 0:
            raise FabricHookError("the model has no float32, float16 or bfloat16 gradient")
        agreement = GroupAgreement(group)
        job, name = agree_on_job(controller, host, floats, agreement, job_options)
        worker = open_worker(job, name, agreement)
    except FabricHookError as error:
        if not fallback:
            raise
        LOG.warning("gradients go over the process group, not the fabric: %s", error)
        return None
    reducer = FabricReducer(job, worker, group, floats, fallback)
    release_at_end(reducer)
    settle_garbage()
    dist.barrier(group)   # every rank's sockets are open before any sends
    model.register_comm_hook(reducer, reduce_bucket)
    LOG.info("rank %d (%s): gradients through job %d", dist.get_rank(group), name, job.id)
    return reducer


def settle_garbage():
    """Collect once, then freeze what is left (the imports, the model: alive until the
    end) out of Python's collector. Else a full collection of them falls in the first
    steps: 0.5-0.6 s on a 2-vCPU host, holding the GIL, so the worker's I/O thread
    paced its first pass at a fifth of the planned rate and the first step took 1.1 s
    instead of 0.4 s (8 ranks, experiments.ddp at 52 Mbit/s)."""
    gc.collect()
    gc.freeze()


def reduce_bucket(reducer, bucket):
    """The hook DDP calls: hook(state, GradBucket) -> Future of the bucket's tensor."""
    return reducer.reduce(bucket)


class FabricReducer:
    """The hook's state: the job and this rank's worker, where the next bucket goes in
    the step's round, and the thread that settles buckets in order."""

    def __init__(self, job, worker, group, floats, fallback):
        self.job, self.worker, self.group = job, worker, group
        self.floats, self.fallback = floats, fallback
        self.world_size = dist.get_world_size(group)
        self.offset = 0           # where the next bucket goes in this step's round
        self.first_round = worker.filling.next_round   # the first step's (after registration's)
        self.fallbacks = 0        # buckets reduced over the process group
        self.settling = queue.Queue()
        self.settler = threading.Thread(target=self._settle, name="syncfabric-buckets", daemon=True)
        self.settler.start()

    def reduce(self, bucket):
        buffer, sums = bucket.buffer(), None
        if buffer.dtype in WIRE_DTYPES:
            # no copy: the worker reads the values (or copies them in) until the bucket's
            # Future ends, and DDP leaves the bucket alone until it ends
            values = buffer.detach().to(torch.float32).numpy()
            sums = self.worker.reduce_part(self.offset, values)
            self.offset += len(values)
        if bucket.is_last():
            given, self.offset = self.offset, 0
            if given != self.floats:
                raise FabricHookError("a step's buckets held %d float32 gradients, not the %d "
                                      "the job was made for" % (given, self.floats))
        item = (bucket.index(), buffer, sums, torch.futures.Future())
        if sums is not None and bucket.is_last():   # the one DDP's finish waits for last
            sums.add_done_callback(lambda _done: self._finish(item))
        else:   # on the settler, while the I/O thread goes on with the round
            self.settling.put(item)
        return item[3]

    def step_stats(self, step):
        """FabricWorker.stats of the round of step `step` (1: the first), once filed."""
        return self.worker.stats.get(self.first_round + step - 1)

    def close(self):
        """Stop settling, close the worker, and (rank 0) release the job."""
        self.settling.put(None)
        close_and_release(self.worker, self.job)

    def _settle(self):
        while True:
            item = self.settling.get()
            if item is None:
                return
            index, buffer, sums, result = item
            try:
                result.set_result(self._settled(index, buffer, sums))
            except Exception as error:   # the step fails with it; the thread goes on
                LOG.error("bucket %d: %s", index, error)
                result.set_exception(error)

    def _finish(self, item):
        """On the worker's I/O thread, as the step's last bucket's sum comes back: complete
        its Future if the sum is finite; else hand it to the settler (error or fallback),
        after the step's other buckets."""
        _index, buffer, sums, result = item
        try:
            mean = self._mean(buffer, sums) if sums.exception() is None else None
        except Exception:   # the settler meets it again and fails the step with it
            mean = None
        if mean is None:
            self.settling.put(item)
        else:
            result.set_result(mean)

    def _mean(self, buffer, sums):
        """The bucket's sum over the ranks divided by the world size, in the bucket's
        dtype; None if the sum is not finite."""
        total = torch.from_numpy(sums.result())
        if not torch.isfinite(total).all():
            return None
        return total.div_(self.world_size).to(buffer.dtype)

    def _settled(self, index, buffer, sums):
        if sums is None:
            return self._over_process_group(buffer)
        mean = self._mean(buffer, sums)
        if mean is None:
            if not self.fallback:
                raise FabricHookError(
                    "bucket %d's gradient sum is not finite (inf or NaN in some rank's "
                    "gradient); pass fallback=True to reduce such buckets over the process "
                    "group instead" % index)
            LOG.warning("bucket %d's sum is not finite: reduced over the process group", index)
            return self._over_process_group(buffer)
        return mean

    def _over_process_group(self, buffer):
        self.fallbacks += 1
        dist.all_reduce(buffer, group=self.group)
        return buffer.div_(self.world_size)
