"""One rank of DDP over the "fabric" backend against DDP over Gloo, in a Mininet host
(tests/integration/test_jobs.py, by experiments.traffic.gloo_peers.run_ranks): a linear
model trained with no hook over the fabric's world group and over a Gloo group of the
same ranks, from the same parameters. Its gradients are sums of whole-number inputs at
every step, whatever the parameters (and whole numbers still once DDP divides them by
the world size), so any order of summation gives the same sum and the two must end
alike, bit for bit. Then an all-gather through the group's gather job and a
reduce-scatter through its scatter job (the defaults) against Gloo's.
Rank 0 prints one JSON line: whether they did, whether the all-gathers and the
reduce-scatters gave the same, how many calls went which way, and why none (or no
all-gather, or no reduce-scatter) went through the fabric if so."""

import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from syncfabric.hosts.training.gloo_peers import joined, rank_parser
from syncfabric.torch import FabricOptions


def trained(group, rank, world, steps):
    """The parameters of nn.Linear(64, 10) after `steps` SGD steps of DDP over `group`.
    DDP divides each rank's gradient by the world size before the sum: inputs that are
    multiples of it, world * 11 of them a step, keep each quotient a whole number."""
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Linear(64, 10), process_group=group)
    optimizer = torch.optim.SGD(model.parameters(), lr=2 ** -6)
    for step in range(steps):
        drawn = torch.Generator().manual_seed(step * 100 + rank)
        inputs = world * torch.randint(-2, 3, (world * 11, 64), generator=drawn)
        model(inputs.float()).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    return [parameter.detach() for parameter in model.module.parameters()]


def gathered_alike(group, rank, world):
    """Whether an all-gather of 50 000 floats a rank (-0.0, NaN and infinities among
    them) gives over `group` what it gives over a Gloo group of the same ranks."""
    mine = torch.randn(50_000, generator=torch.Generator().manual_seed(rank))
    mine[:4] = torch.tensor([-0.0, float("nan"), float("inf"), -float("inf")])
    ours, theirs = torch.empty(world * 50_000), torch.empty(world * 50_000)
    dist.all_gather_into_tensor(ours, mine, group=group)
    dist.all_gather_into_tensor(theirs, mine, group=dist.new_group(backend="gloo"))
    return torch.equal(ours.view(torch.int32), theirs.view(torch.int32))


def scattered_alike(group, rank, world):
    """Whether a reduce-scatter of 50 000 whole numbers a rank's slice (exact sums in any
    order) gives over `group` what it gives over a Gloo group of the same ranks."""
    whole = torch.randint(-1000, 1000, (world * 50_000,),
                          generator=torch.Generator().manual_seed(100 + rank)).float()
    ours, theirs = torch.empty(50_000), torch.empty(50_000)
    dist.reduce_scatter_tensor(ours, whole, group=group)
    dist.reduce_scatter_tensor(theirs, whole, group=dist.new_group(backend="gloo"))
    return torch.equal(ours.view(torch.int32), theirs.view(torch.int32))


def main(argv=None):
    parser = rank_parser("ddp_alike_ranks", __doc__, "the number of workers")
    parser.add_argument("--controller", required=True, help="the controller's URL")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args(argv)
    # every bucket through the fabric, however small; one shard, as the test's jobs
    options = FabricOptions(controller=args.controller, host=args.name, min_bytes=0,
                            job_options={"shards": 1, "placement": "dedicated"})
    with joined(args, "fabric", options):
        ours = trained(dist.group.WORLD, args.rank, args.world, args.steps)
        theirs = trained(dist.new_group(backend="gloo"), args.rank, args.world, args.steps)
        alike = all(torch.equal(a.view(torch.int32), b.view(torch.int32))
                    for a, b in zip(ours, theirs))
        gathered = gathered_alike(dist.group.WORLD, args.rank, args.world)
        scattered = scattered_alike(dist.group.WORLD, args.rank, args.world)
        if args.rank == 0:
            print(json.dumps({"alike": alike, "gathered_alike": gathered,
                              "scattered_alike": scattered,
                              "counts": dict(dist.group.WORLD.counts),
                              "gloo_only": dist.group.WORLD.gloo_only,
                              "gather_refused": dist.group.WORLD.gather_refused,
                              "scatter_refused": dist.group.WORLD.scatter_refused}),
                  flush=True)
    sys.stdout.flush()
    os._exit(0)   # as experiments.traffic.ddp_training: Gloo may abort in finalization


if __name__ == "__main__":
    sys.exit(main())
