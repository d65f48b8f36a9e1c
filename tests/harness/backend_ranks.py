"""One rank of the fabric backend's unit tests (tests/unit/test_torch_backend.py), started
by loopback_jobs.run_ranks: init_process_group("fabric") on the controller stand-in,
then all-reduces of several lengths, dtypes and ops, synchronous and not, each compared
bit for bit with the same call over a Gloo group of the same ranks (integer-valued data:
every order of summation gives the same sum), or (--fsdp) FSDP2 or HSDP trained over
both, or (--lose-a-host) a host lost under a running job, under plain calls or DDP. It
prints one JSON line: the error if any, each call's verdict or what the calls after the
loss raised, and how many calls went which way."""

import argparse
import json
import os
import traceback

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel

from syncfabric.torch import FabricOptions

# (floats, dtype, op, async): below and above min_bytes, below it in a round begun (the
# fabric's), longer than a round, each dtype the wire carries, a dtype it does not, and
# an op it does not sum
CALLS = [(100, "float32", "SUM", False), (70_000, "float32", "SUM", False),
         (100, "float32", "SUM", False), (70_000, "float32", "AVG", True), (300_000, "float32", "SUM", True),
         (70_000, "bfloat16", "SUM", False), (70_000, "float16", "AVG", False),
         (70_000, "float64", "SUM", False), (70_000, "float32", "MAX", False)]


def integers(floats, dtype, rank, seed):
    """Whole numbers small enough that sums of a few ranks are exact in bfloat16."""
    values = (torch.arange(floats, dtype=torch.int64) * 7 + seed + rank) % 40
    return values.to(getattr(torch, dtype))


def compare(calls, rank, gloo):
    """Each call's verdict: whether the fabric group's result equals Gloo's, bit for bit."""
    verdicts = []
    for seed, (floats, dtype, op, async_op) in enumerate(calls):
        ours, theirs = integers(floats, dtype, rank, seed), integers(floats, dtype, rank, seed)
        dist.all_reduce(theirs, op=getattr(dist.ReduceOp, op), group=gloo)
        work = dist.all_reduce(ours, op=getattr(dist.ReduceOp, op), async_op=async_op)
        if async_op:
            future_result = work.get_future().wait()[0]
            work.wait()
            verdicts.append(bool(torch.equal(ours, theirs) and future_result is ours))
        else:
            verdicts.append(bool(torch.equal(ours, theirs)))
    return verdicts


def every_float(floats, rank, seed):
    """float32 values of every kind a broadcast or all-gather must carry bit for bit:
    -0.0, tiny and huge ones, infinities and NaN among random ones."""
    values = torch.randn(floats, generator=torch.Generator().manual_seed(seed + rank)) * 1e3
    values[:6] = torch.tensor([-0.0, 0.0, 1e-40, -3e38, float("inf"), float("nan")])
    return values


BITS = {2: torch.int16, 4: torch.int32}   # an integer dtype of each float's size


def same(ours, theirs):
    """Bit for bit (NaN's too)."""
    return ours.dtype == theirs.dtype and bool(torch.equal(
        ours.view(BITS[ours.element_size()]), theirs.view(BITS[theirs.element_size()])))


def compare_collectives(rank, size, gloo):
    """Each collective the fabric carries besides all_reduce, against Gloo's: {name:
    verdict}. PREMUL_SUM, which Gloo lacks, against the sum made here."""
    verdicts = {}
    for name, dtype, root in (("broadcast", torch.float32, 1), ("broadcast_bf16",
                                                                  torch.bfloat16, 0)):
        ours = every_float(70_000, rank, 1).to(dtype)
        theirs = ours.clone()
        dist.broadcast(theirs, root, group=gloo)
        work = dist.broadcast(ours, root, async_op=True)
        work.wait()
        verdicts[name] = same(ours, theirs) and work.get_future().wait()[0] is ours
    mine = every_float(40_000, rank, 2)
    ours = [torch.empty(40_000) for _ in range(size)]
    theirs = [torch.empty(40_000) for _ in range(size)]
    dist.all_gather(theirs, mine, group=gloo)
    dist.all_gather(ours, mine)
    verdicts["all_gather"] = all(same(o, t) for o, t in zip(ours, theirs))
    ours, theirs = torch.empty(size * 40_000), torch.empty(size * 40_000)
    dist.all_gather_into_tensor(theirs, mine, group=gloo)
    dist.all_gather_into_tensor(ours, mine)
    verdicts["all_gather_into_tensor"] = same(ours, theirs)
    longer = every_float(90_000, rank, 8)   # longer than the gather job's round: three
    ours, theirs = torch.empty(size * 90_000), torch.empty(size * 90_000)
    dist.all_gather_into_tensor(theirs, longer, group=gloo)
    dist.all_gather_into_tensor(ours, longer)
    verdicts["all_gather_longer"] = same(ours, theirs)
    shorter = every_float(30_000, rank, 9)   # in the rows the longer one left of its round
    ours, theirs = torch.empty(size * 30_000), torch.empty(size * 30_000)
    dist.all_gather_into_tensor(theirs, shorter, group=gloo)
    dist.all_gather_into_tensor(ours, shorter)
    verdicts["all_gather_shorter"] = same(ours, theirs)
    inputs = [integers(40_000, "float32", rank, 3 + k) for k in range(size)]
    ours, theirs = torch.empty(40_000), torch.empty(40_000)
    dist.reduce_scatter(theirs, inputs, group=gloo)
    dist.reduce_scatter(ours, inputs)
    verdicts["reduce_scatter"] = same(ours, theirs)
    whole = integers(size * 40_000, "float16", rank, 4)
    ours, theirs = (torch.empty(40_000, dtype=torch.float16) for _ in range(2))
    dist.reduce_scatter_tensor(theirs, whole, op=dist.ReduceOp.AVG, group=gloo)
    dist.reduce_scatter_tensor(ours, whole, op=dist.ReduceOp.AVG)
    verdicts["reduce_scatter_tensor_avg_fp16"] = same(ours, theirs)
    whole = integers(size * 90_000, "float32", rank, 10)   # longer than a scatter round
    ours, theirs = torch.empty(90_000), torch.empty(90_000)
    dist.reduce_scatter_tensor(theirs, whole, group=gloo)
    dist.reduce_scatter_tensor(ours, whole)
    verdicts["reduce_scatter_longer"] = same(ours, theirs)
    fresh = dist.new_group()   # the fabric's too, and no job yet: a short call goes to Gloo
    whole = integers(size * 100, "float32", rank, 7)
    ours, theirs = torch.empty(100), torch.empty(100)
    dist.reduce_scatter_tensor(theirs, whole, group=gloo)
    work = dist.reduce_scatter_tensor(ours, whole, group=fresh, async_op=True)
    verdicts["reduce_scatter_tensor_over_gloo"] = (
        work.get_future().wait()[0] is ours and same(ours, theirs)
        and fresh.counts == {"fabric": 0, "gloo": 1})
    parts = [integers(30_000 + k, "float32", rank, 5 + k) for k in range(3)]
    ours, theirs = [p.clone() for p in parts], [p.clone() for p in parts]
    dist.all_reduce_coalesced(theirs, group=gloo)
    dist.all_reduce_coalesced(ours)
    verdicts["all_reduce_coalesced"] = all(same(o, t) for o, t in zip(ours, theirs))
    ours = integers(70_000, "float32", rank, 6)
    dist.all_reduce(ours, op=dist._make_nccl_premul_sum(3.0))
    expected = sum(3.0 * integers(70_000, "float32", r, 6) for r in range(size))
    verdicts["premul_sum"] = same(ours, expected)
    verdicts["premul_sum_refused_changes_nothing"] = premul_refused_unchanged(rank)
    return verdicts


def premul_refused_unchanged(rank):
    """A PREMUL_SUM call Gloo refuses raises, and leaves its tensors as they were, not
    multiplied by its factor: two tensors of two lengths to the group's own allreduce,
    as torch.distributed calls it (several tensors are Gloo's: each gets the sum of
    all, which Gloo checks are alike)."""
    uneven = [integers(100, "float32", rank, 8), integers(101, "float32", rank, 8)]
    before = [tensor.clone() for tensor in uneven]
    options = dist.AllreduceOptions()
    options.reduceOp = dist._make_nccl_premul_sum(3.0)
    try:
        dist.group.WORLD.allreduce(uneven, options)
    except RuntimeError:
        return all(same(now, then) for now, then in zip(uneven, before))
    return False


def fail_on_a_lost_host(rank, answer):
    """Rank 1's host is lost once the job runs (it prints its answer and exits): rank 0's
    next all-reduce through the fabric fails naming it, and the one after at once."""
    big = integers(70_000, "float32", rank, 0)
    dist.all_reduce(big)   # the job is made, and runs
    dist.barrier()
    if rank == 1:
        print(json.dumps(answer), flush=True)
        os._exit(0)
    for attempt in ("first", "next"):
        try:
            dist.all_reduce(big)
        except RuntimeError as error:
            answer[attempt] = str(error)


def fail_under_ddp(rank, answer, steps=6, leaves_at=3):
    """DDP with no hook, rank 1's host lost before step `leaves_at`: rank 0's bucket
    whose round fails is not summed, and its next all-reduce raises the error (no
    crash)."""
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 10)),
                                    bucket_cap_mb=0.01)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        if step == leaves_at and rank == 1:
            print(json.dumps(answer), flush=True)
            os._exit(0)
        x, target = torch.randn(8, 16), torch.randint(0, 10, (8,))
        try:
            loss = nn.functional.cross_entropy(model(x), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        except RuntimeError as error:
            answer.update(raised_at=step, raised=str(error))
            return


def fsdp_meshes(hybrid):
    """[the fabric's mesh, Gloo's] of every rank: one dimension (FSDP2; None: the default
    group's), or (hybrid) 2 replicas of 2 shards (HSDP), each dimension's groups ours or
    Gloo's."""
    if not hybrid:
        return [None, DeviceMesh.from_group(dist.new_group(backend="gloo"), "cpu")]
    shape, names = (2, dist.get_world_size() // 2), ("replicate", "shard")
    return [init_device_mesh("cpu", shape, mesh_dim_names=names),
            init_device_mesh("cpu", shape, mesh_dim_names=names,
                             backend_override={0: "gloo", 1: "gloo"})]


def fsdp_alike(rank, meshes, steps=20):
    """FSDP2 (fully_shard on each layer and the model) of one MLP trained `steps` SGD
    steps over the fabric's mesh and over Gloo's (fsdp_meshes), from the same parameters
    on integer-valued data: whether every parameter ends bit for bit alike (each sum is
    of two ranks: in either order, the same)."""
    models = []
    for mesh in meshes:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10))
        for layer in (*model[::2], model):
            fully_shard(layer, mesh=mesh)
        models.append(model)
    for model in models:
        optimizer = torch.optim.SGD(model.parameters(), lr=2 ** -6)
        for step in range(steps):
            inputs = torch.Generator().manual_seed(step * 10 + rank)
            model(torch.randint(-2, 3, (32, 64), generator=inputs).float()).sum().backward()
            optimizer.step()
            optimizer.zero_grad()
    return all(same(ours.full_tensor(), theirs.full_tensor())
               for ours, theirs in zip(models[0].parameters(), models[1].parameters()))


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--controller", required=True)
    parser.add_argument("--hosts", required=True, help="each rank's fabric host, in order")
    parser.add_argument("--capacity-bytes", type=int, default=400_000)
    parser.add_argument("--min-bytes", type=int, default=100_000)
    parser.add_argument("--gather-job", action=argparse.BooleanOptionalAction, default=True,
                        help="all-gathers through a gather job of the group's (the default)")
    parser.add_argument("--scatter-job", action=argparse.BooleanOptionalAction, default=True,
                        help="reduce-scatters through a scatter job of the group's (the "
                             "default)")
    parser.add_argument("--fsdp", choices=("fsdp", "hsdp"),
                        help="FSDP2, or HSDP over 2 replicas, over the fabric and over Gloo "
                             "instead (fsdp_alike)")
    parser.add_argument("--lose-a-host", choices=("calls", "ddp"),
                        help="rank 1 leaves once the job runs, under plain calls "
                             "(fail_on_a_lost_host) or DDP (fail_under_ddp)")
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    answer = {"error": None}
    try:
        options = FabricOptions(controller=args.controller, host=args.hosts.split(",")[rank],
                                capacity_bytes=args.capacity_bytes, min_bytes=args.min_bytes,
                                gather_job=args.gather_job, scatter_job=args.scatter_job)
        dist.init_process_group("fabric", pg_options=options)
        if args.lose_a_host == "calls":
            fail_on_a_lost_host(rank, answer)
        elif args.lose_a_host == "ddp":
            fail_under_ddp(rank, answer)
        elif args.fsdp:
            answer["fsdp_alike"] = fsdp_alike(rank, fsdp_meshes(args.fsdp == "hsdp"))
        else:
            gloo = dist.new_group(backend="gloo")
            answer["verdicts"] = compare(CALLS, rank, gloo)
            answer["collectives"] = compare_collectives(rank, dist.get_world_size(), gloo)
        answer["counts"] = dict(dist.group.WORLD.counts)
        answer["gloo_only"] = dist.group.WORLD.gloo_only
        answer["gather_refused"] = dist.group.WORLD.gather_refused
        answer["scatter_refused"] = dist.group.WORLD.scatter_refused
        dist.destroy_process_group()
    except Exception as error:   # the test reads it
        answer.update(error=str(error), traceback=traceback.format_exc())
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
