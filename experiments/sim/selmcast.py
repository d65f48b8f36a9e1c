"""SELMCAST at the paper's scale: BSP and SSP, SELMCAST vs random-p, swept over n and lambda.

    python -m experiments.sim.selmcast --out results/sim/selmcast.csv

One big switch, the paper's settings (syncfabric/decisions/receiver_selection.py for the
selection, experiments/selmcast_selection.py for the trials,
experiments/sim/ssp_rounds.py for SSP's event model): p = 0.3n, k = 4,
egress b(1 + lam x), ingress b(1 + lam x'), x, x' ~ U[-1, 1].
- BSP: normalized completion (t over its lower bound) and multicast scale,
  for n in --n (lam = 0.5) and for lam in --lams (n = --lam-n);
- SSP: multicast scale per update, for n in --ssp-n (lam = 0.5) and for lam
  in --lams (n = the paper's 50); 40 Gbit/s, 200 MB updates; L3 (the paper's
  SSP figures are multicast ones; L7's one transfer per receiver makes the
  event model some 20 times slower).
BSP with both cost models (L3 multicast, L7 fan-out). Writes a CSV (the columns of
selmcast_selection plus `sweep`) and a PNG, and prints the paper's headline
figures next to ours.
"""

import sys
from pathlib import Path

from experiments import selmcast_selection
from experiments.cli import comma_list, experiment_parser, write_csv
from experiments.plots.selmcast import plot_sim_selmcast
from syncfabric.decisions.selection_round import RANDOM, SELMCAST

COLUMNS = ["sweep"] + selmcast_selection.COLUMNS
# (sync, cost model, policy) -> the paper's figure at n = 100 (BSP completion) or the
# scale (SSP, n = 50)
PAPER = {("bsp", "L3", RANDOM): 1.67, ("bsp", "L3", SELMCAST): 1.02,
         ("bsp", "L7", RANDOM): 1.67, ("bsp", "L7", SELMCAST): 1.32}
PAPER_SSP_SCALE = {RANDOM: 0.30, SELMCAST: 0.55}


def parse_args(argv):
    parser = experiment_parser("experiments.sim.selmcast", __doc__)
    parser.add_argument("--n", type=comma_list(int), default=[50, 100, 150, 200],
                        help="BSP workers swept at lam = 0.5")
    parser.add_argument("--lams", type=comma_list(float), default=[0.1, 0.3, 0.5, 0.7, 0.9],
                        help="heterogeneity lambda swept")
    parser.add_argument("--lam-n", type=int, default=100, help="BSP workers in the lambda sweep")
    parser.add_argument("--ssp-n", type=comma_list(int), default=[25, 50],
                        help="SSP workers swept at lam = 0.5")
    parser.add_argument("--trials", type=int, default=10, help="BSP trials (10 rounds each)")
    parser.add_argument("--ssp-trials", type=int, default=3)
    parser.add_argument("--ssp-iterations", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/sim/selmcast.csv"))
    args = parser.parse_args(argv)
    if min(args.n + args.ssp_n + [args.lam_n]) < 2 or args.trials < 1 or args.ssp_trials < 1:
        parser.error("every n must be >= 2 and the trials positive")
    if not all(0 <= lam < 1 for lam in args.lams):
        parser.error("--lams must be in [0, 1)")
    return args


def sweep(args, name, sync, ns, lam, trials):
    """Rows of selmcast_selection for these settings, marked with the sweep's name."""
    options = selmcast_selection.parse_args([
        "--sync", sync, "--n", ",".join(map(str, ns)), "--lam", str(lam),
        "--trials", str(trials), "--policies", "%s,%s" % (SELMCAST, RANDOM),
        "--cost-models", "L3,L7" if sync == "bsp" else "L3",
        "--iterations", str(args.ssp_iterations), "--seed", str(args.seed)])
    return [dict(row, sweep=name) for row in selmcast_selection.run(options)]


def main(argv=None):
    args = parse_args(argv)
    rows = sweep(args, "n", "bsp", args.n, 0.5, args.trials)
    for lam in args.lams:
        rows += sweep(args, "lam", "bsp", [args.lam_n], lam, args.trials)
    rows += sweep(args, "n", "ssp", args.ssp_n, 0.5, args.ssp_trials)
    for lam in args.lams:
        rows += sweep(args, "lam", "ssp", [50], lam, args.ssp_trials)
    write_csv(rows, args.out, COLUMNS)
    for row in rows:
        key = (row["sync"], row["cost_model"], row["policy"])
        if row["sweep"] == "n" and row["sync"] == "bsp" and row["n"] == 100 and key in PAPER:
            print("BSP n=100 %s %s: normalized completion %.2f (paper %.2f), scale %.2f"
                  % (row["cost_model"], row["policy"], row["normalized_completion"], PAPER[key],
                     row["multicast_scale"]))
        if row["sweep"] == "n" and row["sync"] == "ssp" and row["n"] == 50:
            print("SSP n=50 %s %s: multicast scale %.2f (paper %.2f)"
                  % (row["cost_model"], row["policy"], row["multicast_scale"],
                     PAPER_SSP_SCALE[row["policy"]]))
    print("CSV: %s  figure: %s" % (args.out, plot_sim_selmcast(args.out)), file=sys.stderr)


if __name__ == "__main__":
    main()
