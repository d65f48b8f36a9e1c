"""The GRID paper's worked example: the minimum worker rate of each policy, planned and
(with --emulate) measured with real gradients on the triangle in Mininet.

    python -m experiments.grid_example [--emulate] [--out results/grid_example.csv]

Prints one JSON object per policy (no-ina, nearest, grid) with `min_rate` from
apps/ina_placement.py in the paper's units (expected 1, 2.4375 and 3), plus
the LP's, the rounded and the repaired theta. With --emulate, the triangle
of mininet_topos/grid_example.py runs with links of 3 Mbit/s, PS ingress 9
and aggregator capacity 9; the INA app installs each policy's plan, and
experiments/traffic/gradients.py moves seeded float32 gradients through it
and checks the PS's sum: each object then also has `measured_min_rate_mbps`
(a worker's gradient on the wire, headers included, over the round's
communication time), `comm_time_s` and `verified`. Writes a CSV and a PNG.
"""

import json
import statistics
import sys
from pathlib import Path

from tqdm import tqdm

from apps.fabric_view import FabricView
from apps.ina_placement import GRID, NEAREST, NO_INA, InaProblem, plan
from experiments.cli import ArgumentParser, progress_printer, write_csv
from experiments.plots import plot_ina
from experiments.testbed import FabricTestbed
from experiments.traffic.gradients import run_plan
from mininet_topos.description import describe
from mininet_topos.grid_example import WORKERS_ON, GridExampleTopo
from mininet_topos.platform_net import PlatformError

POLICIES = (NO_INA, NEAREST, GRID)
WORKERS = sorted((w for ws in WORKERS_ON.values() for w in ws), key=lambda w: int(w[1:]))
COLUMNS = ["policy", "workers", "min_rate", "theta_lp", "theta_rounded", "theta_repaired",
           "measured_min_rate_mbps", "comm_time_s", "predicted_comm_time_s", "verified",
           "repair_passes"]


def parse_args(argv):
    parser = ArgumentParser(prog="python -m experiments.grid_example",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("--emulate", action="store_true",
                        help="also run each plan in Mininet with real gradients")
    parser.add_argument("--gradient-mb", type=float, default=1.0,
                        help="gradient size per worker, MB (with --emulate)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per policy (with --emulate)")
    parser.add_argument("--of-port", type=int, default=6653, help="controller's OpenFlow port")
    parser.add_argument("--rest-port", type=int, default=8080, help="controller's REST port")
    parser.add_argument("--out", type=Path, default=Path("results/grid_example.csv"))
    args = parser.parse_args(argv)
    if args.gradient_mb <= 0 or args.rounds < 1:
        parser.error("--gradient-mb and --rounds must be positive")
    return args


def planned(topo):
    view = FabricView(describe(topo))
    rows = []
    for policy in POLICIES:
        result = plan(InaProblem(view.graph, WORKERS, "ps", view.aggregators), policy)
        rows.append({"policy": policy, "workers": len(WORKERS), "min_rate": result.theta,
                     "theta_lp": result.theta_lp, "theta_rounded": result.theta_rounded,
                     "theta_repaired": result.theta_repaired})
    return rows


def emulate(args, topo, rows):
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                       progress=progress_printer("grid_example")) as bed:
        for row in tqdm(rows, desc="policies", unit="policy", file=sys.stderr):
            answer, results = run_plan(bed, {"job": "example-%s" % row["policy"], "workers": WORKERS,
                                             "ps": "ps", "policy": row["policy"]},
                                       args.rounds, args.gradient_mb)
            row.update(measured_min_rate_mbps=statistics.median(r["min_rate_mbps"] for r in results),
                       comm_time_s=statistics.median(r["comm_time_s"] for r in results),
                       predicted_comm_time_s=answer["predicted_comm_time_s"],
                       verified=all(r["verified"] for r in results),
                       repair_passes=max(r["repair_passes"] for r in results))
        leftovers = bed.leftovers()
    if leftovers:
        raise RuntimeError("switches still hold steering state: %s" % leftovers)


def main(argv=None):
    args = parse_args(argv)
    topo = GridExampleTopo()
    rows = planned(topo)
    if args.emulate:
        try:
            emulate(args, topo, rows)
        except (PlatformError, RuntimeError, ValueError) as error:
            sys.exit("error: %s" % error)
    for row in rows:
        print(json.dumps({k: v for k, v in row.items() if k != "workers"}))
    write_csv(rows, args.out, COLUMNS)
    print("CSV: %s  figure: %s" % (args.out, plot_ina(args.out)), file=sys.stderr)
    if args.emulate and not all(row["verified"] for row in rows):
        sys.exit("error: a round's sum at the PS did not match the exact sum")


if __name__ == "__main__":
    main()
