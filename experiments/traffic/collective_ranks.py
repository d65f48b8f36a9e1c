"""One rank of experiments.collectives: torch.distributed's collectives, as a program
calls them, over one backend ("fabric" or "gloo"), each timed and checked.

    GLOO_SOCKET_IFNAME=h1-eth0 python -m experiments.traffic.collective_ranks --name h1 \\
        --data-ip 10.0.0.1 --rank 0 --world 8 --master 10.0.0.1:29500 --backend fabric \\
        --controller http://10.0.0.254:8080 --sizes 0.125,1,4 --repeats 3

Each collective of each size (MB: the tensor every rank holds for all_reduce and
broadcast, the gathered output of all_gather_into_tensor, the input of
reduce_scatter_tensor) runs --repeats times (--below-repeats at or below --below-mb).
Every rank starts each call at one moment (ddp_training.start_together) and times it
to its wait()'s return; rank 0 prints one JSON line per call: the slowest rank's time,
whether every rank's result was exact (whole numbers: every order of summation gives
the same sum), and whether the call went through the fabric (the group's counts), and
why not where the group took none (`gloo_only`: its job was refused or could not run).
Before them, the group's first calls (FIRST_CALL: an all-reduce of --first-mb, then
unless --no-gather-job an all-gather of --first-gather-mb, and unless --no-scatter-job a
reduce-scatter of as many), in which the fabric's group makes its job (and its gather
and scatter jobs) and Gloo's connects, are timed and printed alike, as one row: a
one-time cost, not any call's.

With --beside-gloo (the fabric's ranks), each call at or below --below-mb, which the
fabric's group leaves to Gloo, is also made on a Gloo group of the same ranks, right
before or after it (in turn), and printed with `beside`: the cost of naming the
fabric's backend, call by call, on the same processes beside the same background.

Each --crossover-sizes size is called --repeats times, through the fabric even where it
is below the group's threshold (every rank lowers its group's min_bytes to 0 for it at
the same call, so all decide alike), each call beside the Gloo group's with
--beside-gloo: where the fabric begins to beat Gloo, which sets the backend's MIN_BYTES.
The sizes left to Gloo are called first, after the first call has filled its round: a
short call that follows a round begun goes on in it (call_stream.py).
"""

import argparse
import json
import os
import sys
import time
from contextlib import contextmanager

import torch
import torch.distributed as dist

from experiments.traffic.ddp_training import start_together
from syncfabric.hosts.jobs.job_lease import LEASE_S
from syncfabric.hosts.training.gloo_peers import joined, rank_parser
from syncfabric.torch import FabricOptions

COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "reduce_scatter")
FIRST_CALL = "first_call"   # the group's first call, as a row's collective


def whole_numbers(floats, rank, seed):
    """A rank's float32 values: small whole numbers, so every sum is exact."""
    return ((torch.arange(floats, dtype=torch.int64) * 7 + seed + 3 * rank) % 50).float()


def call(name, floats, rank, world, seed, group=None):
    """(a function making the call and returning its Work, a function saying whether its
    result is what it must be) for collective `name` of `floats` float32 values, on
    `group` (None: the world's)."""
    if name == "all_reduce":
        tensor = whole_numbers(floats, rank, seed)
        expected = sum(whole_numbers(floats, r, seed) for r in range(world))
        return (lambda: dist.all_reduce(tensor, group=group, async_op=True),
                lambda: torch.equal(tensor, expected))
    if name == "broadcast":
        tensor = whole_numbers(floats, rank, seed)
        expected = whole_numbers(floats, 0, seed)
        return (lambda: dist.broadcast(tensor, 0, group=group, async_op=True),
                lambda: torch.equal(tensor, expected))
    part = floats // world
    if name == "all_gather":
        output = torch.empty(part * world)
        mine = whole_numbers(part, rank, seed)
        expected = torch.cat([whole_numbers(part, r, seed) for r in range(world)])
        return (lambda: dist.all_gather_into_tensor(output, mine, group=group, async_op=True),
                lambda: torch.equal(output, expected))
    output = torch.empty(part)
    whole = whole_numbers(part * world, rank, seed)
    expected = sum(whole_numbers(part * world, r, seed) for r in range(world))
    return (lambda: dist.reduce_scatter_tensor(output, whole, group=group, async_op=True),
            lambda: torch.equal(output, expected[rank * part:(rank + 1) * part]))


def first_calls(floats, side_floats, rank, world, sides):
    """FIRST_CALL's calls, as call()'s: an all-reduce of `floats`, then each collective
    of `sides` ("all_gather", "reduce_scatter": those the group makes a job of its own
    for) of side_floats, one after another."""
    calls = [call("all_reduce", floats, rank, world, 0)]
    calls += [call(name, side_floats, rank, world, 0) for name in sides]

    def start():
        for begin, _exact in calls[:-1]:
            begin().wait()
        return calls[-1][0]()
    return start, lambda: all([exact() for _begin, exact in calls])


def gloo_only_reason():
    """Why the world group's calls go to Gloo (the fabric's group says; None: they may go
    through the fabric, or the group is Gloo's own)."""
    return getattr(dist.group.WORLD, "gloo_only", None)


def fabric_calls():
    """How many calls of the world group have gone through the fabric so far."""
    return getattr(dist.group.WORLD, "counts", {}).get("fabric", 0)


def floats_of(size_mb, world):
    """A size in MB as float32s, a whole number of them per rank."""
    return int(size_mb * 2 ** 20) // 4 // world * world


def measure(args):
    first = floats_of(args.first_mb, args.world)
    gathered = floats_of(args.first_gather_mb or args.first_mb, args.world)
    sides = ["all_gather"] * args.gather_job + ["reduce_scatter"] * args.scatter_job
    timed(args, FIRST_CALL, args.first_mb, 1,
          first_calls(first, gathered, args.rank, args.world, sides))
    beside = dist.new_group(backend="gloo") if args.beside_gloo else None
    for size_mb, carried_below in sizes_in_turn(args):
        floats = floats_of(size_mb, args.world)
        paired = beside is not None and (size_mb <= args.below_mb or carried_below)
        with threshold_lowered(carried_below):
            for name in COLLECTIVES:
                for repeat in range(1, repeats_of(size_mb, args.repeats, args.below_mb,
                                                  args.below_repeats, carried_below) + 1):
                    groups = [None]
                    if paired:
                        groups = [None, beside] if repeat % 2 else [beside, None]
                    for group in groups:
                        timed(args, name, size_mb, repeat,
                              call(name, floats, args.rank, args.world, repeat, group),
                              beside=group is not None)


def sizes_in_turn(args):
    """(size_mb, whether the fabric's group carries it below its threshold) in the order
    measured: the --sizes the group leaves to Gloo first, then the others and the
    --crossover-sizes from the smallest."""
    left_to_gloo = sorted(size for size in args.sizes if size <= args.below_mb)
    carried = [(size, False) for size in args.sizes if size > args.below_mb]
    carried += [(size, True) for size in args.crossover_sizes]
    return [(size, False) for size in left_to_gloo] + sorted(carried)


@contextmanager
def threshold_lowered(lowered):
    """While `lowered`, the world's fabric group carries every call it may whatever its
    size (min_bytes 0), as it would with a threshold below it; a Gloo group has none."""
    options = getattr(dist.group.WORLD, "options", None)
    if not lowered or options is None:
        yield
        return
    kept, options.min_bytes = options.min_bytes, 0
    try:
        yield
    finally:
        options.min_bytes = kept


def repeats_of(size_mb, repeats, below_mb, below_repeats, carried_below=False):
    """How many calls of each collective of size_mb: below_repeats (None: repeats) at or
    below below_mb (the sizes the fabric's group leaves to Gloo) unless the fabric carries
    it there (a crossover size), else repeats."""
    below = size_mb <= below_mb and below_repeats is not None and not carried_below
    return below_repeats if below else repeats


def timed(args, name, size_mb, repeat, made, beside=False):
    """Make the call `made` (call()'s pair) on every rank at one moment; rank 0 prints
    its row (`beside`: the call was on the Gloo group beside the world's)."""
    start, work_of = made
    before = fabric_calls()
    started, started_at = start_together()
    start().wait()
    took = time.perf_counter() - started
    mine = {"s": took, "exact": bool(work_of()), "fabric": fabric_calls() > before}
    everyone = [None] * args.world
    dist.all_gather_object(everyone, mine)
    if args.rank == 0:
        print(json.dumps({
            "collective": name, "size_mb": size_mb, "repeat": repeat,
            "started_at": started_at, "seconds": max(r["s"] for r in everyone),
            "verified": all(r["exact"] for r in everyone),
            "through_fabric": all(r["fabric"] for r in everyone),
            "gloo_only": gloo_only_reason(), "beside": beside}), flush=True)


def megabytes(text):
    """A comma list of sizes in MB."""
    return [float(size) for size in text.split(",") if size]


def parse_args(argv):
    parser = rank_parser("collective_ranks", __doc__, "the number of ranks")
    parser.prog = "python -m experiments.traffic.collective_ranks"
    parser.add_argument("--backend", choices=("fabric", "gloo"), default="gloo")
    parser.add_argument("--controller", default=None, help="the controller's URL (fabric)")
    parser.add_argument("--shards", type=int, default=0, help="PS shards (0: the controller's)")
    parser.add_argument("--placement", default="dedicated", help="POST /jobs's placement")
    parser.add_argument("--capacity-bytes", type=int, default=None,
                        help="the job's round (default: the first call's)")
    parser.add_argument("--sizes", type=megabytes,
                        default=[1.0], help="comma list of MB")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--below-mb", type=float, default=0.0,
                        help="sizes at or below this many MB are called --below-repeats times")
    parser.add_argument("--below-repeats", type=int, default=None,
                        help="calls of each size at or below --below-mb (default: --repeats)")
    parser.add_argument("--first-mb", type=float, default=1.0,
                        help="the group's first call, an all-reduce of this many MB, timed "
                        "apart (the fabric's group makes its job in it)")
    parser.add_argument("--first-gather-mb", type=float, default=None,
                        help="unless --no-gather-job, the group's first all-gather, of this many "
                        "MB (default: --first-mb), and unless --no-scatter-job its first "
                        "reduce-scatter, as many, timed with the first call: the fabric's "
                        "group makes its gather and scatter jobs in them, each round a slice "
                        "of it from every rank")
    parser.add_argument("--crossover-sizes", type=megabytes,
                        default=[], help="comma list of MB the fabric's group carries even "
                        "below its threshold, --repeats calls each (with --beside-gloo each "
                        "beside the Gloo group's): where the fabric begins to beat Gloo")
    parser.add_argument("--beside-gloo", action="store_true",
                        help="each call at or below --below-mb, and of the --crossover-sizes, "
                        "also on a Gloo group of the same ranks, in turn before and after "
                        "the world group's")
    parser.add_argument("--gather-job", action=argparse.BooleanOptionalAction, default=True,
                        help="the fabric's all-gathers through a gather job of the group's "
                        "(FabricOptions.gather_job, the default)")
    parser.add_argument("--scatter-job", action=argparse.BooleanOptionalAction, default=True,
                        help="the fabric's reduce-scatters through a scatter job of the "
                        "group's (FabricOptions.scatter_job, the default)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    options = None
    if args.backend == "fabric":
        options = FabricOptions(controller=args.controller, host=args.name,
                                capacity_bytes=args.capacity_bytes,
                                job_options={"placement": args.placement,
                                             "shards": args.shards or "auto", "ttl_s": LEASE_S},
                                gather_job=args.gather_job, scatter_job=args.scatter_job)
    with joined(args, args.backend, options):
        measure(args)
    sys.stdout.flush()
    os._exit(0)   # as ddp_training: Gloo may abort in the interpreter's finalization


if __name__ == "__main__":
    sys.exit(main())
