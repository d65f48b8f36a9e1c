"""What the papers' worked examples share (experiments.grid_example, experiments.inart_example):
their flags, running each policy's plan with real gradients in Mininet, and the ending."""

import json
import statistics
import sys
from pathlib import Path

from tqdm import tqdm

from experiments import fidelity
from experiments.cli import ArgumentParser, progress_printer, write_csv
from experiments.plots.ina import plot_ina
from experiments.testbed import FabricTestbed
from experiments.traffic.policy_rounds import policy_job, run_policy_rounds


def example_arguments(name, doc, argv=None):
    """The flags of `python -m experiments.NAME` (doc: its module docstring)."""
    parser = ArgumentParser(prog="python -m experiments.%s" % name, description=doc.split("\n\n")[0])
    parser.add_argument("--emulate", action="store_true",
                        help="also run each plan in Mininet with real gradients")
    parser.add_argument("--gradient-mb", type=float, default=1.0,
                        help="gradient size per worker, MB (with --emulate)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per policy (with --emulate)")
    parser.add_argument("--of-port", type=int, default=6653, help="controller's OpenFlow port")
    parser.add_argument("--rest-port", type=int, default=8080, help="controller's REST port")
    parser.add_argument("--out", type=Path, default=Path("results/%s.csv" % name))
    args = parser.parse_args(argv)
    if args.gradient_mb <= 0 or args.rounds < 1:
        parser.error("--gradient-mb and --rounds must be positive")
    return args


def emulate(args, topo, rows, workers, pss, measured_key, name):
    """Run each row's policy as a job of `workers` with its PSs on `pss`
    (policy_rounds), and add the measured rate (median), comm_time_s,
    predicted_comm_time_s (the job's round), verified and repair_passes to the row.
    RuntimeError if a switch keeps state."""
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                       progress=progress_printer(name)) as bed:
        for row in tqdm(rows, desc="policies", unit="policy", file=sys.stderr):
            job, _plan, results = run_policy_rounds(
                bed, policy_job(workers, pss, row["policy"], args.gradient_mb), args.rounds)
            row.update({measured_key: statistics.median(r["min_rate_mbps"] for r in results)},
                       comm_time_s=statistics.median(r["comm_time_s"] for r in results),
                       predicted_comm_time_s=job["predicted_round_s"],
                       verified=all(r["verified"] for r in results),
                       repair_passes=max(r["repair_passes"] for r in results),
                       # the row keeps up only if every round did: the first that did not
                       **next(({k: r[k] for k in fidelity.COLUMNS} for r in results
                               if not r["fidelity_ok"]),
                              {k: results[-1][k] for k in fidelity.COLUMNS}))
        leftovers = bed.leftovers()
    if leftovers:
        raise RuntimeError("switches still hold steering state: %s" % leftovers)


def example_main(argv, name, doc, topo, planned, workers, pss, measured_key, columns):
    """`python -m experiments.NAME`: plan every policy on `topo` (planned(topo) -> rows),
    with --emulate run each as a job of `workers` with its PSs on `pss`, then finish."""
    args = example_arguments(name, doc, argv)
    rows = planned(topo)
    if args.emulate:
        try:
            emulate(args, topo, rows, workers, pss, measured_key, name)
        except (RuntimeError, ValueError) as error:   # PlatformError is a RuntimeError
            sys.exit("error: %s" % error)
    finish(args, rows, columns)


def finish(args, rows, columns):
    """Print a JSON object per row, write the CSV and the figure, exit 1 if unverified."""
    for row in rows:
        print(json.dumps({k: v for k, v in row.items() if k != "workers"}))
    write_csv([{k: json.dumps(v) if isinstance(v, dict) else v for k, v in row.items()}
               for row in rows], args.out, columns)
    print("CSV: %s  figure: %s" % (args.out, plot_ina(args.out)), file=sys.stderr)
    if args.emulate and not all(row["verified"] for row in rows):
        sys.exit("error: a round's sum at a PS did not match the exact sum")
