"""Benchmark: how long a client waits for a job (POST /jobs), planning included, on a
Mininet spine-leaf with an aggregator on every spine at the link rate.

Each job takes --workers hosts drawn at random (seeded) from the fabric, so no two plans
are alike; it is created, timed from the client's side (the controller plans the round,
books and installs its return trees and gradient plan, and every switch confirms them),
then deleted, before the next one.

    python -m experiments.job_setup --workers 8 --jobs 50

Writes CSV (one row per job) and a figure; its last line is JSON with p50_ms and p99_ms.
Targets on 8x8 with 8 workers: p50 under 100 ms, p99 under 300 ms.
"""

import json
import random
import statistics
import time
from pathlib import Path

from tqdm import tqdm

from experiments.plots.jobs import plot_job_setup
from experiments.cli import (build_fabric, experiment_parser, fabric_arguments, progress_printer,
                             topo_spec, write_csv)
from experiments.testbed import FabricTestbed
from mininet_topos.platform_net import PlatformError
from syncfabric.decisions import round_planner

COLUMNS = ["job", "workers", "placement", "shards", "setup_ms", "release_ms", "predicted_round_s"]
say = progress_printer("job_setup")


def parse_args(argv):
    parser = experiment_parser("experiments.job_setup", __doc__)
    fabric_arguments(parser, bw=20.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=50)
    parser.add_argument("--model-bytes", type=int, default=1_200_000)
    parser.add_argument("--placement", default="auto", choices=round_planner.PLACEMENTS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/job_setup.csv"))
    return parser.parse_args(argv)


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def measure(args):
    topo = build_fabric(args, aggregators="top", aggregator_bw=args.bw)
    rng, rows = random.Random(args.seed), []
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                       progress=say) as bed:
        hosts = [h["name"] for h in bed.client.get("/fabric/topology")["hosts"]
                 if h.get("role") != "aggregator"]
        for number in tqdm(range(1, args.jobs + 1), desc="jobs", unit="job"):
            workers = rng.sample(hosts, args.workers)
            started = time.perf_counter()
            job = bed.client.request("POST", "/jobs", {"workers": workers,
                                                       "model_bytes": args.model_bytes,
                                                       "placement": args.placement})
            created = time.perf_counter()
            bed.client.request("DELETE", "/jobs/%d" % job["id"])
            rows.append({"job": number, "workers": len(workers), "placement": job["placement"],
                         "shards": len(job["shards"]), "setup_ms": (created - started) * 1e3,
                         "release_ms": (time.perf_counter() - created) * 1e3,
                         "predicted_round_s": job["predicted_round_s"]})
        if bed.leftovers():
            raise RuntimeError("switches still hold state after every job was deleted: %s"
                               % bed.leftovers())
    return rows


def main(argv=None):
    args = parse_args(argv)
    try:
        rows = measure(args)
    except (PlatformError, RuntimeError) as error:
        raise SystemExit("error: %s" % error)
    write_csv(rows, args.out, COLUMNS)
    figure = plot_job_setup(args.out)
    setup = [r["setup_ms"] for r in rows]
    print("CSV: %s  figure: %s" % (args.out, figure))
    print(json.dumps({"jobs": len(rows), "workers": args.workers,
                      "fabric": str(topo_spec(args)), "link_mbps": args.bw,
                      "p50_ms": round(statistics.median(setup), 1),
                      "p99_ms": round(percentile(setup, 0.99), 1),
                      "max_ms": round(max(setup), 1)}))


if __name__ == "__main__":
    main()
