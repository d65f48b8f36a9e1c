"""SELMCAST receiver selection on one big switch (no Mininet): SELMCAST vs random-p vs the MILP.

    python -m experiments.selmcast_selection --n 100 --p-fraction 0.3 --lam 0.5 --trials 10
    python -m experiments.selmcast_selection --n 50,100,200 --out results/selmcast_sweep.csv
    python -m experiments.selmcast_selection --sync ssp --n 50

BSP: per trial, egress b'_j = b(1 + lam x) and ingress b_i = mu b(1 + lam x'),
x, x' ~ U[-1, 1], mu = --ingress-factor, equal update sizes, p = round(p-fraction n);
--rounds rounds run one after another on one history, so the k-rule (pairs
unsynced for k rounds are forced; nothing before round k + 1) takes effect.
Prints one JSON object per (policy, cost model, n): normalized_completion =
t / LB and multicast_scale = receivers per sender / n (both defined in
syncfabric/decisions/receiver_selection.py), means over trials and rounds, and selection_ms
(median). The MILP runs where n <= --milp-max-n; SELMCAST's row then has
t_vs_milp_worst, the largest t / t_MILP over the same rounds.
SSP (--sync ssp): the paper's settings (40 Gbit/s, 200 MB updates, compute
times U[0.5, 1.5] x --compute-mean-s, k = 4, staleness 4), --iterations per
worker, event by event (experiments/sim/ssp_rounds.py); multicast scale per update.
Writes CSV and a PNG beside it.
"""

import json
import random
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from experiments.cli import comma_list, experiment_parser, write_csv
from experiments.plots.selmcast import plot_selmcast_selection
from experiments.sim.ssp_rounds import simulate_ssp
from syncfabric.decisions.receiver_selection import select
from syncfabric.decisions.selection_round import (COST_MODELS, MILP, POLICIES, RANDOM, SELMCAST,
                                                  RoundInput, multicast_scale,
                                                  normalized_completion)
from syncfabric.decisions.sync_history import SyncHistory

COLUMNS = ["sync", "policy", "cost_model", "n", "p_fraction", "lam", "ingress_factor",
           "normalized_completion", "multicast_scale", "selection_ms", "t_vs_milp_worst",
           "milp_rounds"]
SSP_LINK_BPS = 40e9
SSP_UPDATE_BITS = 200e6 * 8


def parse_args(argv):
    parser = experiment_parser("experiments.selmcast_selection", __doc__)
    parser.add_argument("--n", type=comma_list(int), default=[100], help="workers (comma list: sweep)")
    parser.add_argument("--p-fraction", type=float, default=0.3, help="p = round(p-fraction * n)")
    parser.add_argument("--lam", type=float, default=0.5, help="bandwidth heterogeneity lambda")
    parser.add_argument("--ingress-factor", type=float, default=1.0,
                        help="mu: ingress = mu * b (1 + lam x'); large means ingress unconstrained")
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10, help="BSP rounds per trial")
    parser.add_argument("--k", type=int, default=4, help="a pair unsynced for k rounds is forced")
    parser.add_argument("--cost-models", type=comma_list(str, COST_MODELS), default=list(COST_MODELS))
    parser.add_argument("--policies", type=comma_list(str, POLICIES + (MILP,)),
                        default=[SELMCAST, RANDOM, MILP])
    parser.add_argument("--milp-max-n", type=int, default=10, help="run the MILP only up to this n")
    parser.add_argument("--sync", choices=("bsp", "ssp"), default="bsp")
    parser.add_argument("--iterations", type=int, default=20, help="SSP iterations per worker")
    parser.add_argument("--compute-mean-s", type=float, default=1.0, help="SSP mean compute time")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/selmcast_selection.csv"))
    args = parser.parse_args(argv)
    if min(args.n) < 2 or args.trials < 1 or args.rounds < 1 or args.k < 1 or args.iterations < 1:
        parser.error("--n must be >= 2 and --trials, --rounds, --k, --iterations positive")
    if not 0 < args.p_fraction < 1 or not 0 <= args.lam < 1 or args.ingress_factor <= 0 \
            or args.compute_mean_s <= 0:
        parser.error("need 0 < --p-fraction < 1, 0 <= --lam < 1, positive --ingress-factor "
                     "and --compute-mean-s")
    return args


def bandwidths(rng, n, lam, ingress_factor, scale=1.0):
    egress = scale * (1 + lam * rng.uniform(-1, 1, n))
    ingress = ingress_factor * scale * (1 + lam * rng.uniform(-1, 1, n))
    return ingress, egress


def bsp_trial(args, n, trial, policy, cost_model):
    """Run --rounds rounds of one policy on one history; returns per-round figures."""
    rng = np.random.default_rng([args.seed, n, trial])
    ingress, egress = bandwidths(rng, n, args.lam, args.ingress_factor)
    p = max(1, round(args.p_fraction * n))
    history, names, chooser = SyncHistory(args.k), list(range(n)), random.Random(trial)
    rounds = []
    for _ in range(args.rounds):
        forced, unsynced = history.matrices(names)
        problem = RoundInput.build(np.ones(n), ingress, egress, p, forced, unsynced)
        started = time.perf_counter()
        selection = select(problem, cost_model, policy, chooser)
        selection_ms = 1e3 * (time.perf_counter() - started)
        history.record_round(names, selection.receivers)
        figures = {"normalized_completion": normalized_completion(selection, problem),
                   "multicast_scale": multicast_scale(selection), "selection_ms": selection_ms}
        if policy == SELMCAST and n <= args.milp_max_n and MILP in args.policies:
            figures["t_vs_milp"] = selection.t / select(problem, cost_model, MILP).t
        rounds.append(figures)
    return rounds


def ssp_trial(args, n, trial, policy, cost_model):
    rng = np.random.default_rng([args.seed, n, trial])
    ingress, egress = bandwidths(rng, n, args.lam, args.ingress_factor, SSP_LINK_BPS)
    compute = args.compute_mean_s * rng.uniform(0.5, 1.5, (n, args.iterations))
    result = simulate_ssp(np.full(n, SSP_UPDATE_BITS), ingress, egress,
                          np.full(n, max(1, round(args.p_fraction * n))), compute, policy,
                          cost_model, k=args.k, rng=random.Random(trial))
    return [{"multicast_scale": result.multicast_scale,
             "selection_ms": statistics.median(result.decisions_ms)}]


def run(args):
    policies = [p for p in args.policies if args.sync == "bsp" or p != MILP]
    cases = [(n, policy, cost_model) for n in args.n for cost_model in args.cost_models
             for policy in policies if policy != MILP or n <= args.milp_max_n]
    trial_function = bsp_trial if args.sync == "bsp" else ssp_trial
    rows = []
    with tqdm(total=len(cases) * args.trials, desc="trials", unit="trial", file=sys.stderr) as bar:
        for n, policy, cost_model in cases:
            rounds = []
            for trial in range(args.trials):
                rounds += trial_function(args, n, trial, policy, cost_model)
                bar.update()
            rows.append(summarize(args, n, policy, cost_model, rounds))
    return rows


def summarize(args, n, policy, cost_model, rounds):
    row = {"sync": args.sync, "policy": policy, "cost_model": cost_model, "n": n,
           "p_fraction": args.p_fraction, "lam": args.lam, "ingress_factor": args.ingress_factor,
           "multicast_scale": statistics.fmean(r["multicast_scale"] for r in rounds),
           "selection_ms": statistics.median(r["selection_ms"] for r in rounds)}
    if args.sync == "bsp":
        row["normalized_completion"] = statistics.fmean(r["normalized_completion"] for r in rounds)
    gaps = [r["t_vs_milp"] for r in rounds if "t_vs_milp" in r]
    if gaps:
        row["t_vs_milp_worst"], row["milp_rounds"] = max(gaps), len(gaps)
    return row


def main(argv=None):
    args = parse_args(argv)
    rows = run(args)
    for row in rows:
        print(json.dumps({key: (round(value, 4) if isinstance(value, float) else value)
                          for key, value in row.items()}), flush=True)
    write_csv(rows, args.out, COLUMNS)
    print("CSV: %s  figure: %s" % (args.out, plot_selmcast_selection(args.out)), file=sys.stderr)


if __name__ == "__main__":
    main()
