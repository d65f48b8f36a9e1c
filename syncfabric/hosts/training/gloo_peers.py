"""What data-parallel users run today, on the job's hosts: PyTorch's torch.distributed
with the Gloo backend, bound to the data-plane interface and routed by our fabric app.

    GLOO_SOCKET_IFNAME=h1-eth0 python -m syncfabric.hosts.training.gloo_peers --name h1 \\
        --data-ip 10.0.0.1 --rank 0 --world 9 --workers 8 --master 10.0.0.1:29500 \\
        --floats 300000 --rounds 5 --patterns allreduce,ps

Ranks 0..workers-1 are the workers; rank `workers`, if the world has one more, is
the PS. Per round and pattern:
- `allreduce`: the workers all-reduce their gradients (what DDP runs every step);
- `ps`: the workers reduce their gradients to the PS, then the PS broadcasts its
  parameters (the PS pattern, over Gloo).
Every gradient holds small integers, so any order of summation is exact: the sum
is checked against the one computed from the seeds, element for element. Each
rank times the collective from a barrier to its own end; the round's time is the
slowest rank's. Rank 0 prints one JSON line per round and pattern: `pattern`,
`round`, `comm_s` (and `reduce_s`, `broadcast_s` for `ps`; `started_at`, rank 0's
time.time() before the barrier, for `allreduce`), `verified`.
"""

import datetime
import json
import sys
import time
from contextlib import contextmanager

import numpy as np
import torch
import torch.distributed as dist

from syncfabric.hosts.cli import ArgumentParser

GRADIENT_MAGNITUDE = 2 ** 10   # |g| <= this: 64 workers sum exactly in float32 (2**24)


PATTERNS = ("allreduce", "ps")


PARAMETER_STREAM = 1_000_003   # the PS's parameters: a seed stream no worker rank uses


TIMEOUT_S = 300      # a collective that takes longer fails the run


def gradient(seed, rank, floats):
    """Worker `rank`'s gradient: integers, so that every summation order is exact."""
    rng = np.random.default_rng((seed, rank))
    return rng.integers(-GRADIENT_MAGNITUDE, GRADIENT_MAGNITUDE + 1, floats).astype(np.float32)


def expected_sum(seed, workers, floats):
    return sum(gradient(seed, rank, floats).astype(np.float64) for rank in range(workers))


def parameters(seed, floats):
    return np.random.default_rng((seed, PARAMETER_STREAM)).standard_normal(floats, dtype=np.float32)


def slowest(seconds, exact, group=None):
    """(the largest of every rank's seconds, whether every rank's result was exact)."""
    values = torch.tensor([seconds, 0.0 if exact else 1.0], dtype=torch.float64)
    dist.all_reduce(values, op=dist.ReduceOp.MAX, group=group)
    return float(values[0]), values[1].item() == 0.0


def timed(operation, group=None):
    dist.barrier(group=group)
    started = time.perf_counter()
    operation()
    return time.perf_counter() - started


def allreduce_round(args, workers_group, expected):
    tensor = torch.from_numpy(gradient(args.seed, args.rank, args.floats))
    started_at = time.time()
    seconds = timed(lambda: dist.all_reduce(tensor, group=workers_group), workers_group)
    exact = bool(np.array_equal(tensor.numpy(), expected))
    comm_s, verified = slowest(seconds, exact, workers_group)
    return {"comm_s": comm_s, "verified": verified, "started_at": started_at}


def ps_round(args, expected):
    ps = args.workers
    is_ps = args.rank == ps
    tensor = torch.zeros(args.floats) if is_ps \
        else torch.from_numpy(gradient(args.seed, args.rank, args.floats))
    reduce_s = timed(lambda: dist.reduce(tensor, dst=ps))
    exact = bool(np.array_equal(tensor.numpy(), expected)) if is_ps else True
    model = torch.from_numpy(parameters(args.seed, args.floats)) if is_ps \
        else torch.empty(args.floats)
    broadcast_s = timed(lambda: dist.broadcast(model, src=ps))
    exact = exact and bool(np.array_equal(model.numpy(), parameters(args.seed, args.floats)))
    reduce_s, verified = slowest(reduce_s, exact)
    broadcast_s, _ = slowest(broadcast_s, True)
    return {"comm_s": reduce_s + broadcast_s, "reduce_s": reduce_s, "broadcast_s": broadcast_s,
            "verified": verified}


@contextmanager
def joined(args, backend="gloo", pg_options=None):
    """In the job's process group as args.rank (rank_parser's arguments), left at the end;
    over Gloo, or another backend (the fabric's, with its pg_options)."""
    torch.set_num_threads(1)   # many peers share two cores
    dist.init_process_group(backend, init_method="tcp://%s" % args.master, rank=args.rank,
                            world_size=args.world, timeout=datetime.timedelta(seconds=TIMEOUT_S),
                            pg_options=pg_options)
    try:
        yield
    finally:
        dist.destroy_process_group()


def rank_parser(program, doc, world_help):
    """A rank program's parser, with the arguments the Gloo driver gives every rank."""
    parser = ArgumentParser(prog="python -m syncfabric.hosts.training." + program,
                            description=doc.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="this host's name in the fabric")
    parser.add_argument("--data-ip", required=True, help="this host's data-plane address")
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True, help=world_help)
    parser.add_argument("--master", required=True, help="rank 0's data-plane IP:port")
    return parser


def run(args):
    with joined(args):
        workers_group = dist.new_group(list(range(args.workers)))
        expected = expected_sum(args.seed, args.workers, args.floats).astype(np.float32)
        if args.start_at is not None:
            time.sleep(max(0.0, args.start_at - time.time()))
        for number in range(1, args.rounds + 1):
            if number > 1:
                time.sleep(args.compute_s)   # the accelerator's forward and backward pass
            for pattern in args.patterns:
                if pattern == "allreduce":
                    if args.rank >= args.workers:
                        continue
                    result = allreduce_round(args, workers_group, expected)
                else:
                    result = ps_round(args, expected)
                if args.rank == 0:
                    print(json.dumps(dict(result, pattern=pattern, round=number)), flush=True)


def parse_args(argv):
    parser = rank_parser("gloo_peers", __doc__, "workers, plus one with a PS")
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--floats", type=int, required=True, help="float32 values in the model")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--patterns", default=",".join(PATTERNS),
                        help="comma list of %s" % ", ".join(PATTERNS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start-at", type=float, default=None, metavar="TIME",
                        help="begin the first round at this time.time(), once every rank "
                             "has joined (default: as soon as they have)")
    parser.add_argument("--compute-s", type=float, default=0.0, metavar="SECONDS",
                        help="wait this long between rounds, standing in for a training "
                             "step's compute (default 0: back to back)")
    args = parser.parse_args(argv)
    if args.compute_s < 0:
        parser.error("--compute-s cannot be negative")
    args.patterns = [p for p in args.patterns.split(",") if p]
    if not args.patterns or set(args.patterns) - set(PATTERNS):
        parser.error("--patterns must be a comma list of %s" % ", ".join(PATTERNS))
    if "ps" in args.patterns and args.world != args.workers + 1:
        parser.error("the ps pattern needs --world = --workers + 1 (the PS)")
    return args


def main(argv=None):
    run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
