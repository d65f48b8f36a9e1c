"""One DDP rank of the hook's and the backend's unit tests (tests/unit/test_torch_hook.py,
test_torch_backend.py), started by loopback_jobs.run_ranks: a tiny model whose layers
are registered in another order than they run (so DDP's rebuilt buckets differ from the
first step's), trained a few steps over Gloo, through fabric_hook, or over the "fabric"
backend with no hook. It prints one JSON line: the error if any, each step's parameter
hash on every rank, the final parameters, and what the hook or the backend did."""

import argparse
import json
import os
import sys
import threading
import traceback

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from experiments.traffic.ddp_training import parameter_hash
from syncfabric.torch import FabricOptions, fabric_hook
from syncfabric.torch.hook import FabricReducer


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(64, 10)   # registered first, its gradient ready first
        self.body = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())

    def forward(self, x):
        return self.head(self.body(x).to(self.head.weight.dtype))


def tiny_digits():
    """A user's own model for experiments.ddp's --model: the digits' 8x8 images, 32 hidden."""
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def watch_buckets(seen):
    """Record each bucket's size, the buckets still unsettled when it comes, and the
    thread that completed its Future."""
    reduce, futures = FabricReducer.reduce, []

    def watched(reducer, bucket):
        record = {"floats": bucket.buffer().numel(), "index": bucket.index(),
                  "last": bucket.is_last(), "in_flight": sum(not f.done() for f in futures)}
        seen.append(record)
        futures.append(reduce(reducer, bucket))
        futures[-1].add_done_callback(
            lambda _future: record.update(settled_by=threading.current_thread().name))
        return futures[-1]
    FabricReducer.reduce = watched


def train(args, answer):
    torch.manual_seed(args.seed)
    dtype = torch.float32 if args.dtype == "mixed" else getattr(torch, args.dtype)
    module = Tiny().to(dtype)
    if args.dtype == "mixed":   # the head in float64, the body in float32
        module.head.double()
    model = DistributedDataParallel(module, bucket_cap_mb=args.bucket_cap_mb)
    rank = dist.get_rank()
    if args.mode == "fabric":
        names = args.hosts.split(",") if args.hosts else None
        reducer = fabric_hook(model, controller=args.controller, fallback=args.fallback,
                              host=names[rank] if names else None)
        answer["registered"] = reducer is not None
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1, args.steps + 1):
        generator = torch.Generator().manual_seed(1000 * step + rank)
        x = torch.randn(8, 16, generator=generator).to(dtype)
        target = torch.randint(0, 10, (8,), generator=generator)
        loss = nn.functional.cross_entropy(model(x).float(), target)
        if step == args.nan_step and rank == args.nan_rank:
            loss = loss * float("nan")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        hashes = [None] * dist.get_world_size()
        dist.all_gather_object(hashes, parameter_hash(model))
        answer["hashes"].append(hashes)
    answer["parameters"] = torch.cat([p.detach().double().flatten()
                                      for p in model.parameters()]).tolist()
    if args.mode == "backend":
        answer["counts"] = dict(dist.group.WORLD.counts)
        answer["gloo_only"] = dist.group.WORLD.gloo_only
    if args.mode == "fabric" and answer.get("registered"):
        answer["fallbacks"] = reducer.fallbacks
        answer["first_step_round"] = reducer.first_round
        answer["rounds_filed"] = sorted(reducer.worker.stats)
        answer["job"] = reducer.job.id


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tests.harness.ddp_ranks", description=__doc__)
    parser.add_argument("--mode", choices=("gloo", "fabric", "backend"), default="fabric",
                        help="over Gloo, through fabric_hook, or over the fabric backend")
    parser.add_argument("--controller", default="http://127.0.0.1:1")
    parser.add_argument("--hosts", default="", help="comma list: rank i's fabric host (default: "
                                                    "GLOO_SOCKET_IFNAME's)")
    parser.add_argument("--dtype", default="float32", help="a torch dtype, or mixed: the head "
                                                          "in float64, the rest float32")
    parser.add_argument("--fallback", action="store_true")
    parser.add_argument("--nan-step", type=int, default=0)
    parser.add_argument("--nan-rank", type=int, default=0)
    parser.add_argument("--bucket-cap-mb", type=float, default=0.01)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.mode == "backend":   # every bucket through the fabric: a round holds a few
        names = args.hosts.split(",") if args.hosts else [None] * int(os.environ["WORLD_SIZE"])
        dist.init_process_group("fabric", pg_options=FabricOptions(
            controller=args.controller, host=names[int(os.environ["RANK"])],
            capacity_bytes=65_536, min_bytes=1_024))
    else:
        dist.init_process_group("gloo")
    answer = {"rank": dist.get_rank(), "error": None, "hashes": [], "buckets": []}
    watch_buckets(answer["buckets"])
    try:
        train(args, answer)
    except Exception as error:
        answer["error"] = "%s: %s" % (type(error).__name__, error)
        answer["traceback"] = traceback.format_exc()[-1500:]
    dist.destroy_process_group()
    print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    sys.exit(main())
