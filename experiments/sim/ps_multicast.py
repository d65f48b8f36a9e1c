"""Simulated PS distribution at datacenter scale: unicast vs random vs path-aware multicast.

    python -m experiments.sim.ps_multicast --out results/sim/ps_multicast.csv
    python -m experiments.sim.ps_multicast --bench

On spine-leaf fabrics (default 8x8 and 64x64, 16 servers per leaf, 100 Gbit/s
links) with the flow-level simulator (experiments/sim/network.py):
- workers sweep: one PS sends the model to N workers (drawn at random):
  unicast is N flows on the controller's unicast routes, sharing max-min;
  random and path-aware are the tree syncfabric/decisions/multicast_trees.py computes,
  reserved at --rate-fraction of the link rate, as one flow at that rate.
  completion_s is when the last worker has the model.
- jobs sweep: J concurrent jobs of --job-workers workers, each wanting
  --job-gbps per worker: trees are computed and booked one after the other
  (syncfabric/decisions/reservations.py; a job whose tree does not fit is not admitted),
  unicast jobs send one flow per worker capped at that rate. max_link_util is
  the highest load / capacity of any switch-to-switch link.
--bench times one round of a 1000-worker path-aware distribution on 64x64
(tree computation and simulation) and prints one JSON object.
"""

import json
import math
import random
import sys
import time
from pathlib import Path

from tqdm import tqdm

from experiments.cli import comma_list, experiment_parser, write_csv
from experiments.plots.multicast import plot_sim_ps_multicast
from experiments.sim.fabrics import GBIT, servers, spine_leaf
from experiments.sim.network import capacities, path_flow, simulate, tree_flow
from experiments.workloads import make_jobs, spread
from syncfabric.decisions.multicast_trees import PATH_AWARE, RANDOM, InfeasibleTree, compute_tree
from syncfabric.decisions.reservations import ReservationBook
from syncfabric.decisions.unicast_routes import host_pair_paths

UNICAST = "unicast"
MODES = (UNICAST, RANDOM, PATH_AWARE)
MBIT_PER_MB = 8.0
COLUMNS = ["sweep", "fabric", "mode", "workers", "jobs", "admitted", "model_mb", "completion_s",
           "line_rate_s", "max_link_util", "link_util_cov", "flows", "events", "sim_s"]


def parse_args(argv):
    parser = experiment_parser("experiments.sim.ps_multicast", __doc__)
    parser.add_argument("--fabrics", type=comma_list(str), default=["8x8", "64x64"],
                        help="spine-leaf fabrics, SPINESxLEAVES")
    parser.add_argument("--hosts-per-leaf", type=int, default=16)
    parser.add_argument("--bw-gbps", type=float, default=100.0, help="every link's rate")
    parser.add_argument("--workers", type=comma_list(int),
                        default=[8, 16, 32, 64, 127, 256, 512, 1000],
                        help="workers per job in the workers sweep (capped by the servers)")
    parser.add_argument("--model-mb", type=float, default=100.0)
    parser.add_argument("--rate-fraction", type=float, default=0.95,
                        help="a tree's reservation as a fraction of the link rate")
    parser.add_argument("--jobs", type=comma_list(int), default=[1, 2, 4, 8, 16, 32, 64],
                        help="concurrent jobs in the jobs sweep")
    parser.add_argument("--job-workers", type=int, default=16)
    parser.add_argument("--job-gbps", type=float, default=10.0,
                        help="per-worker rate each job wants in the jobs sweep")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bench", action="store_true",
                        help="time one 1000-worker path-aware round on 64x64 and exit")
    parser.add_argument("--out", type=Path, default=Path("results/sim/ps_multicast.csv"))
    args = parser.parse_args(argv)
    if min(args.workers) < 1 or min(args.jobs) < 1 or args.job_workers < 1:
        parser.error("--workers, --jobs and --job-workers must be positive")
    if args.model_mb <= 0 or args.bw_gbps <= 0 or not 0 < args.rate_fraction <= 1:
        parser.error("--model-mb and --bw-gbps must be positive, --rate-fraction in (0, 1]")
    return args


def job_flows(view, mode, name, ps, workers, size_mbit, demand_mbps, book, rng, cap=False):
    """The flows one job puts on the fabric (empty if its tree does not fit); with cap,
    unicast flows go at most at demand_mbps each (trees always do)."""
    if mode == UNICAST:
        paths = host_pair_paths(view, pairs=[(ps, w) for w in workers])
        return [path_flow("%s>%s" % (name, w), view, ps, paths[ps, w], w, size_mbit,
                          cap_mbps=demand_mbps if cap else math.inf) for w in workers]
    try:
        tree = compute_tree(view, ps, workers, demand_mbps, book.reserved_mbps, mode, rng)
    except InfeasibleTree:
        return []
    book.reserve(tree)
    return [tree_flow(name, tree, size_mbit, reserved_mbps=demand_mbps)]


def fabric_utilization(view, result):
    """(max, coefficient of variation) of load / capacity over switch-to-switch links."""
    links = [edge for edge in view.graph.edges if edge[0] in view.switches and edge[1] in view.switches]
    return spread([result.peak_load.get(e, 0.0) / view.graph.edges[e]["capacity_mbps"]
                   for e in links])


def run_jobs(view, mode, jobs, size_mbit, demand_mbps, rng, cap):
    """Simulate `jobs` ([(ps, [workers])]) at once; (row fields, seconds it took)."""
    started = time.perf_counter()
    book = ReservationBook(view)
    flows, admitted = [], 0
    for number, (ps, workers) in enumerate(jobs):
        mine = job_flows(view, mode, "job%d" % number, ps, workers, size_mbit, demand_mbps,
                         book, rng, cap)
        admitted += bool(mine)
        flows += mine
    result = simulate(flows, capacities(view))
    sim_s = time.perf_counter() - started
    util, cov = fabric_utilization(view, result)
    return {"admitted": admitted, "completion_s": round(result.makespan_s, 6),
            "max_link_util": round(util, 4), "link_util_cov": round(cov, 4),
            "flows": len(flows), "events": result.events, "sim_s": round(sim_s, 4)}


def bench(args):
    view = spine_leaf("64x64", args.hosts_per_leaf, args.bw_gbps * GBIT)
    hosts = servers(view)
    workers = min(1000, len(hosts) - 1)
    jobs = make_jobs(hosts, 1, workers, random.Random(args.seed))
    row = run_jobs(view, PATH_AWARE, jobs, args.model_mb * MBIT_PER_MB,
                   args.rate_fraction * args.bw_gbps * GBIT, random.Random(args.seed), False)
    print(json.dumps({"workers": workers, "fabric": "64x64", "sim_s": row["sim_s"],
                      "flows": row["flows"], "mode": PATH_AWARE,
                      "completion_s": row["completion_s"]}))


def main(argv=None):
    args = parse_args(argv)
    if args.bench:
        return bench(args)
    size_mbit = args.model_mb * MBIT_PER_MB
    bw = args.bw_gbps * GBIT
    rows = []
    for fabric in args.fabrics:
        try:
            view = spine_leaf(fabric, args.hosts_per_leaf, bw)
        except ValueError as error:
            sys.exit("error: fabric %s: %s" % (fabric, error))
        hosts = servers(view)
        counts = sorted({min(n, len(hosts) - 1) for n in args.workers})
        runs = [("workers", n, 1) for n in counts] + [
            ("jobs", min(args.job_workers, len(hosts) - 1), j) for j in args.jobs]
        for sweep, workers, count in tqdm(runs, desc="sim %s" % fabric, unit="run",
                                          file=sys.stderr):
            jobs = make_jobs(hosts, count, workers, random.Random(args.seed))
            demand = args.rate_fraction * bw if sweep == "workers" else args.job_gbps * GBIT
            for mode in MODES:
                row = run_jobs(view, mode, jobs, size_mbit, demand, random.Random(args.seed),
                               cap=sweep == "jobs")
                rows.append(dict(row, sweep=sweep, fabric=fabric, mode=mode, workers=workers,
                                 jobs=count, model_mb=args.model_mb,
                                 line_rate_s=round(size_mbit / bw, 6)))
    write_csv(rows, args.out, COLUMNS)
    for fabric in args.fabrics:
        by = {(r["sweep"], r["mode"], r["workers"], r["jobs"]): r for r in rows
              if r["fabric"] == fabric}
        top = max(r["workers"] for r in rows if r["fabric"] == fabric and r["sweep"] == "workers")
        unicast, aware = by["workers", UNICAST, top, 1], by["workers", PATH_AWARE, top, 1]
        print("%s, %d workers: unicast %.3f s, path-aware %.3f s (%.1fx faster)"
              % (fabric, top, unicast["completion_s"], aware["completion_s"],
                 unicast["completion_s"] / aware["completion_s"]))
        most = max(args.jobs)
        job_workers = min(args.job_workers, top)
        random_row = by["jobs", RANDOM, job_workers, most]
        aware_row = by["jobs", PATH_AWARE, job_workers, most]
        print("%s, %d jobs: max link utilization random %.3f, path-aware %.3f (%.1f%% lower); "
              "admitted %d and %d" % (fabric, most, random_row["max_link_util"],
                                      aware_row["max_link_util"],
                                      100 * (1 - aware_row["max_link_util"]
                                             / max(random_row["max_link_util"], 1e-12)),
                                      random_row["admitted"], aware_row["admitted"]))
    print("CSV: %s  figure: %s" % (args.out, plot_sim_ps_multicast(args.out)))


if __name__ == "__main__":
    main()
