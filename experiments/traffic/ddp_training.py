"""One rank of experiments.ddp: a user's DistributedDataParallel script on the digits (Adam),
with the fabric's hook as its one added line (modes fabric-stream, fabric-colocated)
or without it (gloo), and the measurements around it.

    GLOO_SOCKET_IFNAME=h1-eth0 python -m experiments.traffic.ddp_training --name h1 \\
        --data-ip 10.0.0.1 --rank 0 --world 8 --master 10.0.0.1:29500 --model cnn \\
        --steps 40 --mode fabric-stream --controller http://10.0.0.254:8080 --shards 4

Each step is timed from a barrier to the end of optimizer.step() (step_s); compute_s is
the same forward and backward on a copy of the model without DDP, plus the step
(what the rank would take with no communication). After each step every rank's
parameter hash is all-gathered over Gloo; rank 0 evaluates the test accuracy and
prints one JSON line: the slowest rank's times, the mean loss, whether every rank's
parameters are identical, and (fabric modes) each rank's round stats
(FabricWorker.stats).
"""

import copy
import hashlib
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from experiments.traffic.torch_models import digits, model_factory
from syncfabric.hosts.gloo_peers import joined, rank_parser
from syncfabric.hosts.job_lease import LEASE_S
from syncfabric.torch import fabric_hook

MODES = ("gloo", "fabric-stream", "fabric-colocated")
PLACEMENT = {"fabric-stream": "dedicated", "fabric-colocated": "colocated"}


def parameter_hash(module):
    """The parameters' bits (any dtype), hashed: equal on two ranks iff they are."""
    digest = hashlib.sha256()
    for parameter in module.parameters():
        digest.update(parameter.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


def timed_step(model, reference, optimizer, x, y):
    """(loss, step_s, compute_s) of one DDP step, and the same without communication."""
    started = time.perf_counter()
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    backward_done = time.perf_counter()
    optimizer.step()
    ended = time.perf_counter()
    reference.zero_grad()
    nn.functional.cross_entropy(reference(x), y).backward()
    compute_s = time.perf_counter() - ended + (ended - backward_done)
    return float(loss), ended - started, compute_s


def round_stats(reducer, step):
    """What the step's round took on the wire (FabricWorker.stats; {} without the hook).
    The worker files them just after the last bucket's sum: wait for them a moment."""
    if reducer is None:
        return {}
    deadline = time.monotonic() + 1.0
    while step not in reducer.worker.stats and time.monotonic() < deadline:
        time.sleep(0.001)
    return reducer.worker.stats[step]


def accuracy(module, x, y):
    with torch.no_grad():
        return float((module(x).argmax(dim=1) == y).float().mean())


def train(args):
    torch.manual_seed(args.seed)
    module = model_factory(args.model)()
    reference = copy.deepcopy(module)
    model = DistributedDataParallel(module)
    reducer = None
    if args.mode != "gloo":
        # host: GLOO_SOCKET_IFNAME's
        reducer = fabric_hook(model, controller=args.controller, placement=PLACEMENT[args.mode],
                              shards=args.shards or "auto", ttl_s=args.lease_s)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    x_train, y_train, x_test, y_test = digits(args.seed)
    mine = torch.arange(args.rank, len(y_train), args.world)
    for step in range(1, args.steps + 1):
        chosen = mine[torch.randperm(len(mine), generator=torch.Generator().manual_seed(
            args.seed * 100003 + step * 1009 + args.rank))[:args.batch]]
        dist.barrier()
        loss, step_s, compute_s = timed_step(model, reference, optimizer, x_train[chosen],
                                             y_train[chosen])
        dist.barrier()
        rounds = round_stats(reducer, step)
        everyone = [None] * args.world
        dist.all_gather_object(everyone, {"step_s": step_s, "compute_s": compute_s, "loss": loss,
                                          "hash": parameter_hash(module), "round": rounds})
        if args.rank == 0:
            slowest = max(everyone, key=lambda r: r["step_s"])
            print(json.dumps({
                "step": step, "step_s": slowest["step_s"],
                "compute_s": max(r["compute_s"] for r in everyone),
                "loss": sum(r["loss"] for r in everyone) / args.world,
                "test_accuracy": accuracy(module, x_test, y_test),
                "ranks_identical": len({r["hash"] for r in everyone}) == 1,
                "rounds": [r["round"] for r in everyone]}), flush=True)


def parse_args(argv):
    parser = rank_parser("ddp_training", __doc__, "the number of workers")
    parser.prog = "python -m experiments.traffic.ddp_training"
    parser.add_argument("--model", default="mlp", help="mlp, cnn or package.module:factory")
    parser.add_argument("--mode", choices=MODES, default="gloo")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--controller", default=None, help="the controller's URL (fabric modes)")
    parser.add_argument("--shards", type=int, default=0, help="PS shards (0: the controller's choice)")
    parser.add_argument("--lease-s", type=float, default=LEASE_S,
                        help="the job's lease, renewed by rank 0 (default %(default)s)")
    parser.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    parser.add_argument("--learning-rate", type=float, default=0.003, help="Adam's")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    with joined(args):
        train(args)
    # Every row is out and the process group destroyed. torch 2.13's Gloo may still abort
    # in the interpreter's finalization ("terminate called without an active exception",
    # 1 run in 4 with 8 ranks, with or without the hook; pytorch/pytorch#179291): skip it.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
