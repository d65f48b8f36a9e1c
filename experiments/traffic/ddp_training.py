"""One rank of experiments.ddp: a user's DistributedDataParallel script on the digits (Adam),
with the fabric's hook as its one added line (modes fabric-stream, fabric-colocated,
fabric-in-network), with no hook over the "fabric" backend (ddp-backend: its process
group's name is the one change), or over Gloo (gloo); or the same model sharded by
FSDP2's fully_shard over Gloo (fsdp-gloo) or over the "fabric" backend (fsdp-backend);
and the measurements around it.

    GLOO_SOCKET_IFNAME=h1-eth0 python -m experiments.traffic.ddp_training --name h1 \\
        --data-ip 10.0.0.1 --rank 0 --world 8 --master 10.0.0.1:29500 --model cnn \\
        --steps 40 --mode fabric-stream --controller http://10.0.0.254:8080 --shards 4

Every rank starts each step at one moment (start_together) and times it to the end of
its optimizer.step() (step_s); compute_s is
the same forward and backward on a copy of the model without DDP, plus the step
(what the rank would take with no communication). After each step every rank's
parameter hash is all-gathered over Gloo; rank 0 (every rank under FSDP2, whose forward
gathers the layers) evaluates the test accuracy, and rank 0
prints one JSON line: when the step started (time.time()), the slowest rank's times,
the mean loss, whether every rank's parameters are identical, (the fabric's modes) each
rank's round stats (FabricWorker.stats) and (over the backend) how many of rank 0's
collectives went through the fabric, or why none can (its group's gloo_only).
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
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel

from experiments.traffic.torch_models import digits, model_factory
from syncfabric.hosts.cli import wait_until
from syncfabric.hosts.training.gloo_peers import joined, rank_parser
from syncfabric.hosts.jobs.job_lease import LEASE_S
from syncfabric.torch import FabricOptions, fabric_hook

BACKEND_MODE = "ddp-backend"   # DDP over init_process_group("fabric"), no hook
FSDP_GLOO = "fsdp-gloo"        # FSDP2 (fully_shard) over Gloo
FSDP_BACKEND = "fsdp-backend"  # FSDP2 over init_process_group("fabric")
OVER_GLOO = ("gloo", FSDP_GLOO)                # the modes with no job
BACKEND_MODES = (BACKEND_MODE, FSDP_BACKEND)   # the modes over the "fabric" backend
PLACEMENT = {"fabric-stream": "dedicated", "fabric-colocated": "colocated",
             "fabric-in-network": "in-network",
             BACKEND_MODE: "dedicated", FSDP_BACKEND: "dedicated"}   # the fabric modes' jobs'
MODES = OVER_GLOO + tuple(PLACEMENT)
# the shards in the switches only when asked for
DEFAULT_MODES = ("gloo", "fabric-stream", "fabric-colocated", BACKEND_MODE)
START_AHEAD_S = 0.05   # how far ahead rank 0 names the moment every rank starts a step


def start_together():
    """Once every rank is ready, start the step on every rank at one moment that rank 0
    names START_AHEAD_S ahead, as job_worker's --start-at does. Leaving a barrier, 8
    ranks on 2 cores were up to 25 ms apart (rank 0 last, after the test accuracy), and
    every rank that left early counted the wait for the last one in its step, in every
    mode. Returns the moment on time.perf_counter's clock (a rank that heard it late
    counts from it too) and on time.time()'s."""
    dist.barrier()
    moment = torch.tensor([time.time() + START_AHEAD_S], dtype=torch.float64)
    dist.broadcast(moment, src=0)
    wait_until(float(moment[0]))
    return time.perf_counter() - max(0.0, time.time() - float(moment[0])), float(moment[0])


def parameter_hash(module):
    """The parameters' bits (any dtype), hashed: equal on two ranks iff they are. FSDP2's
    are gathered whole first (every rank calls it, in the same order)."""
    digest = hashlib.sha256()
    for parameter in module.parameters():
        whole = parameter.full_tensor() if hasattr(parameter, "full_tensor") else parameter
        digest.update(whole.detach().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]


def distributed(module, mode):
    """`module` as the mode trains it: FSDP2's fully_shard on each layer with parameters,
    then on the whole (the fsdp modes), else DistributedDataParallel."""
    if mode not in (FSDP_GLOO, FSDP_BACKEND):
        return DistributedDataParallel(module)
    for layer in list(module.modules()):
        if layer is not module and any(True for _ in layer.parameters(recurse=False)):
            fully_shard(layer)
    return fully_shard(module)


def timed_step(model, reference, optimizer, x, y, started):
    """(loss, step_s, compute_s) of one DDP step from `started` (time.perf_counter), and
    the same without communication."""
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    backward_done = time.perf_counter()
    optimizer.step()
    ended = time.perf_counter()
    reference.zero_grad()
    nn.functional.cross_entropy(reference(x), y).backward()
    compute_s = time.perf_counter() - ended + (ended - backward_done)
    return float(loss.detach()), ended - started, compute_s


def backend_worker():
    """This rank's worker of the default group's job over the "fabric" backend (None:
    another backend, or one whose job was not made)."""
    job = getattr(dist.group.WORLD, "job", None)
    return None if job is None else job.worker


def next_round():
    """The backend's next round to be filled (None without its worker): a step's rounds
    are those from the next round when it began to the next round when it ended."""
    worker = backend_worker()
    return None if worker is None else worker.filling.next_round


def round_stats(reducer, step, first_round):
    """What the step's rounds took on the wire (FabricWorker.stats, filed before their
    last sums are back), summed over them: the hook's round of step `step`, the
    backend's from first_round on; {} over Gloo."""
    if reducer is not None:
        return reducer.step_stats(step)
    if first_round is None:
        return {}
    stats = backend_worker().stats
    filed = [stats[number] for number in range(first_round, next_round()) if number in stats]
    return {key: sum(entry[key] for entry in filed) for key in filed[0]} if filed else {}


def fabric_calls():
    """How many of this rank's collectives went through the fabric's backend so far (None
    over another backend)."""
    counts = getattr(dist.group.WORLD, "counts", None)
    return None if counts is None else counts.get("fabric", 0)


def accuracy(module, x, y):
    with torch.no_grad():
        return float((module(x).argmax(dim=1) == y).float().mean())


def train(args):
    torch.manual_seed(args.seed)
    module = model_factory(args.model)()
    reference = copy.deepcopy(module)
    model = distributed(module, args.mode)
    sharded = args.mode in (FSDP_GLOO, FSDP_BACKEND)
    reducer = None
    if args.mode not in OVER_GLOO + BACKEND_MODES:
        # host: GLOO_SOCKET_IFNAME's
        reducer = fabric_hook(model, controller=args.controller, placement=PLACEMENT[args.mode],
                              shards=args.shards or "auto", ttl_s=args.lease_s)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    x_train, y_train, x_test, y_test = digits(args.seed)
    mine = torch.arange(args.rank, len(y_train), args.world)
    for step in range(1, args.steps + 1):
        chosen = mine[torch.randperm(len(mine), generator=torch.Generator().manual_seed(
            args.seed * 100003 + step * 1009 + args.rank))[:args.batch]]
        started, started_at = start_together()
        first_round = next_round()
        loss, step_s, compute_s = timed_step(model, reference, optimizer, x_train[chosen],
                                             y_train[chosen], started)
        dist.barrier()
        rounds = round_stats(reducer, step, first_round)
        everyone = [None] * args.world
        # FSDP2's forward gathers the layers: every rank takes part
        tested = accuracy(module, x_test, y_test) if sharded or args.rank == 0 else None
        dist.all_gather_object(everyone, {"step_s": step_s, "compute_s": compute_s, "loss": loss,
                                          "hash": parameter_hash(module), "round": rounds})
        if args.rank == 0:
            slowest = max(everyone, key=lambda r: r["step_s"])
            print(json.dumps({
                "step": step, "step_s": slowest["step_s"],
                "started_at": started_at,   # every rank's
                "compute_s": max(r["compute_s"] for r in everyone),
                "loss": sum(r["loss"] for r in everyone) / args.world,
                "test_accuracy": tested,
                "ranks_identical": len({r["hash"] for r in everyone}) == 1,
                "rounds": [r["round"] for r in everyone],
                "fabric_calls": fabric_calls(),
                "gloo_only": getattr(dist.group.WORLD, "gloo_only", None)}), flush=True)


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
    parser.add_argument("--min-bytes", type=int, default=None,
                        help="over the backend: the smallest collective the fabric carries "
                             "(default: the backend's, FabricOptions.min_bytes)")
    parser.add_argument("--batch", type=int, default=32, help="samples per rank per step")
    parser.add_argument("--learning-rate", type=float, default=0.003, help="Adam's")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def backend_options(args):
    """(the process group's backend, its pg_options): the fabric's for BACKEND_MODES, its
    job placed as the hook's fabric-stream; Gloo's otherwise."""
    if args.mode not in BACKEND_MODES:
        return "gloo", None
    options = FabricOptions(controller=args.controller, host=args.name,
                            job_options={"placement": PLACEMENT[args.mode],
                                         "shards": args.shards or "auto", "ttl_s": args.lease_s})
    if args.min_bytes is not None:
        options.min_bytes = args.min_bytes
    return "fabric", options


def main(argv=None):
    args = parse_args(argv)
    with joined(args, *backend_options(args)):
        train(args)
    # Every row is out and the process group destroyed. torch 2.13's Gloo may still abort
    # in the interpreter's finalization ("terminate called without an active exception",
    # 1 run in 4 with 8 ranks, with or without the hook; pytorch/pytorch#179291): skip it.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
