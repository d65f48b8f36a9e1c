"""The processes of experiments.host_allreduce, one per host: a worker of ours
(FabricWorker), a dedicated shard's host (the aggregator daemon, JobDaemon, given the job
without a controller) or a Gloo rank (torch.distributed's all_reduce). The benchmark
starts them in the hosts' namespaces and drives them by lines on stdin:

    go     a worker or rank runs its next round; it answers with one JSON line
           {"round", "start", "end", "cpu_s", "exact"} (time.time() at its start and
           end, its process's CPU seconds in the round, whether every float was exact)
    cpu    a shard's host answers {"cpu_s": its process's CPU seconds so far, "datagrams":
           how many each core's serving loop took so far}
    stop   a shard's host stops

    python -m experiments.host_ranks worker --job job.json --name w1 --rounds 5
"""

import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

from experiments.cli import experiment_parser

ROLES = ("worker", "shard", "gloo")


def base_values(floats, rank):
    """Worker `rank`'s values in round 0: whole numbers, so every sum is exact; round n's
    are these plus n."""
    return (np.arange(floats, dtype=np.int64) % 1000 + rank).astype(np.float32)


def answer(message):
    print(json.dumps(message), flush=True)


def run_rounds(floats, rank, workers, rounds, reduce):
    """Round after round on "go": reduce(values) -> the sum (it may be `values`, summed in
    place), timed and checked. Each round's values are made before its "go", in place."""
    base = base_values(floats, rank)
    base_total = sum(base_values(floats, k) for k in range(workers))
    values = base + np.float32(1)
    answer({"ready": True})
    for number in range(1, rounds + 1):
        assert sys.stdin.readline().strip() == "go"
        cpu, start = time.process_time(), time.time()
        total = reduce(values)
        end, cpu = time.time(), time.process_time() - cpu
        total -= np.float32(workers * number)   # every round's sum is base_total's plus this
        exact = bool(np.array_equal(total, base_total))
        np.add(base, np.float32(number + 1), out=values)   # the next round's, before saying so
        answer({"round": number, "start": start, "end": end, "cpu_s": cpu, "exact": exact})


def worker(args):
    from syncfabric.hosts.jobs.fabric_worker import FabricWorker
    report = json.loads(args.job.read_text())
    fabric = FabricWorker(report, args.name)
    try:
        fabric.wait_served(timeout_s=30.0)
        run_rounds(report["model_bytes"] // 4, report["workers"].index(args.name),
                   len(report["workers"]), args.rounds, lambda values: fabric.allreduce(values, 120))
    finally:
        fabric.close()


class GivenJobs:
    """The controller's client as the daemon reads it (get_changed), answering the one job."""

    def __init__(self, report):
        self.report, self.base_url = report, "(no controller: the benchmark's job)"

    def get_changed(self, _path, etag):
        return (None, "1") if etag == "1" else ({"jobs": [self.report]}, "1")

    def close(self):
        """Nothing to close: no connection was opened."""


def shard(args):
    from syncfabric.hosts.jobs.job_daemon import JobDaemon
    daemon = JobDaemon(GivenJobs(json.loads(args.job.read_text())), args.name, cores=args.cores)

    def commands():
        for line in sys.stdin:
            if line.strip() == "cpu":
                answer({"cpu_s": time.process_time(),
                        "datagrams": [loop.datagrams for loop in daemon.loops]})
            elif line.strip() == "stop":
                break
        daemon.stop()
    threading.Thread(target=commands, daemon=True).start()
    daemon.serve()


def gloo(args):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    floats = args.floats
    dist.init_process_group("gloo", init_method="tcp://%s" % args.master, rank=args.rank,
                            world_size=args.world)

    def reduce(values):   # in place, as DDP's buckets are reduced
        dist.all_reduce(torch.from_numpy(values))
        return values
    try:
        run_rounds(floats, args.rank, args.world, args.rounds, reduce)
    finally:
        dist.destroy_process_group()


def parse_args(argv):
    parser = experiment_parser("experiments.host_ranks", __doc__)
    parser.add_argument("role", choices=ROLES)
    parser.add_argument("--job", type=Path,
                        help="the job's JSON (worker, shard)")
    parser.add_argument("--name", help="this host's name in the job (worker, shard)")
    parser.add_argument("--rounds", type=int, default=5, help="worker, gloo")
    parser.add_argument("--cores", type=int, default=1, help="shard: the daemon's --cores")
    parser.add_argument("--floats", type=int, help="gloo: float32s in the buffer")
    parser.add_argument("--rank", type=int, help="gloo")
    parser.add_argument("--world", type=int, help="gloo")
    parser.add_argument("--master", help="gloo: address:port of rank 0's rendezvous")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    {"worker": worker, "shard": shard, "gloo": gloo}[args.role](args)


if __name__ == "__main__":
    main()
