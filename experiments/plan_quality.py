"""How close the round planner's plans come to the lower bound, and to a ring all-reduce.

    python -m experiments.plan_quality --out results/plan_quality.csv

In process, no emulation: the controller's own planner (round_planner.plan_job) on the
fabrics' descriptions, with the aggregators of the top tier at a multiple of the link
rate (0.45x, the emulated default; 4x; or none, planned without aggregation). Each case
gives the plan's predicted round, the lower bound (round_bounds) and a ring all-reduce
on the same links, each as a multiple of S/B, the time the planner took, and whether the
plan is within 1% of the bound. The last case plans 100 workers on 8x8. Writes a CSV and
a PNG of predicted, bound and ring per case; exits 1 if a bound exceeds its prediction.
"""

import sys
import time
from dataclasses import dataclass

from tqdm import tqdm

from experiments.cli import csv_out_argument, experiment_parser, write_csv
from experiments.plots.planning import plot_plan_quality
from experiments.sim.fabrics import fat_tree, servers, spine_leaf
from syncfabric.decisions import round_planner
from syncfabric.decisions.round_bounds import line_rate_s

COLUMNS = ["topo", "workers", "placement", "aggregator_x", "shards", "predicted_x", "bound_x",
           "ring_x", "plan_s", "optimal"]
LINK_MBPS = 20.0
MODEL_MBIT = 100.0
OPTIMAL = 1.01   # predicted within 1% of the bound


@dataclass(frozen=True)
class Case:
    topo: str            # "2x4": spines x leaves; "fattree4": a k = 4 fat-tree
    hosts_per_switch: int
    workers: int
    aggregator_x: float  # aggregators' capacity as a multiple of the link rate; 0: none
    placement: str = round_planner.COLOCATED
    every: int = 1       # workers are every `every`-th host (one per leaf or edge switch)


def cases():
    """The issue's table, 8x8 with 8, 16 and 32 workers, and 100 workers on 8x8."""
    table = [Case("2x4", 4, 4, x, every=4) for x in (0.45, 0)]
    table += [Case("fattree4", 2, 8, x, every=2) for x in (0.45, 0, 4)]
    table += [Case("8x8", 4, n, x) for n in (8, 16, 32) for x in (0.45, 4, 0)]
    table += [Case("8x8", 13, 100, 0.45, round_planner.AUTO)]
    return table


def fabric(case):
    options = {} if not case.aggregator_x else {
        "aggregators": "top", "aggregator_bw": case.aggregator_x * LINK_MBPS}
    if case.topo.startswith("fattree"):
        return fat_tree(int(case.topo[len("fattree"):]), case.hosts_per_switch, LINK_MBPS,
                        **options)
    return spine_leaf(case.topo, case.hosts_per_switch, LINK_MBPS, **options)


def measure(case):
    view = fabric(case)
    workers = servers(view)[::case.every][:case.workers]
    started = time.perf_counter()
    plan = round_planner.plan_job(view, workers, MODEL_MBIT, case.placement,
                                  aggregation=bool(case.aggregator_x))
    plan_s = time.perf_counter() - started
    unit = line_rate_s(view, workers, MODEL_MBIT)
    return {"topo": case.topo, "workers": len(workers), "placement": case.placement,
            "aggregator_x": case.aggregator_x, "shards": len(plan.pss),
            "predicted_x": round(plan.predicted_s / unit, 4),
            "bound_x": round(plan.bound_s / unit, 4), "ring_x": round(plan.ring_s / unit, 4),
            "plan_s": round(plan_s, 3), "optimal": plan.predicted_s <= plan.bound_s * OPTIMAL}


def parse_args(argv):
    parser = experiment_parser("experiments.plan_quality", __doc__)
    csv_out_argument(parser, "plan_quality")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    rows = [measure(case) for case in tqdm(cases(), desc="cases", unit="case")]
    write_csv(rows, args.out, COLUMNS)
    figure = plot_plan_quality(args.out)
    print("%-9s %7s %10s %5s %6s %9s %7s %6s %7s %s" % (
        "topo", "workers", "placement", "agg x", "shards", "predicted", "bound", "ring",
        "plan s", "optimal"))
    for row in rows:
        print("%-9s %7d %10s %5g %6d %9.3f %7.3f %6.3f %7.3f %s" % tuple(
            row[column] for column in COLUMNS))
    false_bounds = [row for row in rows if row["bound_x"] > row["predicted_x"] * (1 + 1e-6)]
    print("%d of %d plans within 1%% of the bound; %d bounds above their plan; %s, %s"
          % (sum(row["optimal"] for row in rows), len(rows), len(false_bounds), args.out, figure))
    return 1 if false_bounds else 0


if __name__ == "__main__":
    sys.exit(main())
