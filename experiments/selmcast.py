"""SELMCAST on an emulated fabric: P2P rounds with real update bytes, SELMCAST vs random-p.

    python -m experiments.selmcast --workers 16 --rounds 3 --model-mb 1 --out results/selmcast.csv

An 8x8 spine-leaf whose host links are shaped to bw (1 + lam x), x ~ U[-1, 1]
(seeded), so workers differ in bandwidth. h1..hN are the workers. For each
policy and cost model a job runs --rounds rounds (apps/selmcast_controller.py
selects and reserves, experiments/traffic/peer_sync.py moves the bytes, every
receiver checks every sender's SHA-256). Writes one CSV row per round (the
measured completion, the controller's predicted t, receivers per sender / n)
and a PNG, prints the medians, and checks that no switch keeps multicast state.
"""

import random
import statistics
import sys
from pathlib import Path

from tqdm import tqdm

from experiments import fidelity
from experiments.cli import (announce_rate, build_fabric, comma_list, experiment_parser,
                             fabric_arguments, fabric_host_count, finish_emulated_run,
                             progress_printer)
from experiments.plots.selmcast import plot_selmcast
from experiments.testbed import FabricTestbed
from experiments.traffic.peer_sync import run_peer_sync
from mininet_topos.registry import fabric_hosts
from syncfabric.decisions.selection_round import COST_MODELS, L3, POLICIES

COLUMNS = ["policy", "cost_model", "workers", "round", "completion_s", "send_s", "predicted_s",
           "multicast_scale", "verified", "predicted_normalized", "forced_pairs", "setup_s",
           "repair_passes", "deliveries", "link_mbps"] + fidelity.COLUMNS


def parse_args(argv):
    parser = experiment_parser("experiments.selmcast", __doc__)
    fabric_arguments(parser, pattern="all-to-all")
    parser.add_argument("--workers", type=int, default=16, help="workers N (h1..hN)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per policy")
    parser.add_argument("--model-mb", type=float, default=1.0, help="update size per worker, MB")
    parser.add_argument("--policies", type=comma_list(str, POLICIES), default=list(POLICIES))
    parser.add_argument("--cost-models", type=comma_list(str, COST_MODELS), default=[L3])
    parser.add_argument("--p-fraction", type=float, default=0.3, help="p = round(p-fraction N)")
    parser.add_argument("--k", type=int, default=4, help="k-rule: pairs unsynced k rounds are forced")
    parser.add_argument("--lam", type=float, default=0.5, help="host link heterogeneity lambda")
    parser.add_argument("--rate-fraction", type=float, default=0.95,
                        help="senders pace at this fraction of their reservation")
    parser.add_argument("--seed", type=int, default=0, help="seeds the host link rates")
    parser.add_argument("--out", type=Path, default=Path("results/selmcast.csv"))
    args = parser.parse_args(argv)
    hosts = fabric_host_count(args)
    if not 2 <= args.workers <= hosts:
        parser.error("--workers must be between 2 and %d on this fabric" % hosts)
    if args.rounds < 1 or args.model_mb <= 0 or args.k < 1 or not 0 < args.p_fraction < 1 \
            or not 0 <= args.lam < 1 or not 0 < args.rate_fraction <= 1:
        parser.error("need positive --rounds, --model-mb, --k; 0 < --p-fraction < 1; "
                     "0 <= --lam < 1; 0 < --rate-fraction <= 1")
    return args


def host_rates(args):
    rng = random.Random(args.seed)
    return [round(args.bw * (1 + args.lam * rng.uniform(-1, 1)), 3)
            for _ in range(fabric_host_count(args))]


def run(args):
    announce_rate(args)
    topo = build_fabric(args, host_bw=host_rates(args))
    workers = fabric_hosts(topo)[:args.workers]
    p = max(1, round(args.p_fraction * args.workers))
    rows = []
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                       progress=progress_printer("selmcast")) as bed:
        jobs = [(policy, cost_model) for cost_model in args.cost_models for policy in args.policies]
        for policy, cost_model in tqdm(jobs, desc="jobs", unit="job", file=sys.stderr):
            request = {"job": "%s-%s" % (policy, cost_model), "p": p,
                       "k": args.k, "policy": policy, "cost_model": cost_model}
            sampler = bed.sampler().start()
            results = run_peer_sync(bed, workers, args.model_mb, [request] * args.rounds,
                                    args.rate_fraction)
            usage = sampler.stop()
            for number, result in enumerate(results, start=1):
                plan = result["plan"]
                rows.append({"policy": policy, "cost_model": cost_model, "workers": args.workers,
                             "round": number, "completion_s": result["completion_s"],
                             "send_s": result["send_s"],
                             "predicted_s": plan["t_s"], "multicast_scale": plan["multicast_scale"],
                             "verified": result["verified"],
                             "predicted_normalized": plan["normalized_completion"],
                             "forced_pairs": plan["forced_pairs"], "setup_s": result["setup_s"],
                             "repair_passes": result["repair_passes"],
                             "deliveries": result["deliveries"], "link_mbps": args.bw,
                             **fidelity.verdict(1.0, result["planned_send_s"] / result["send_s"],
                                                result["first_pass_loss"], result["lost_chunks"],
                                                usage)})
        leftovers = bed.leftovers()
    return rows, leftovers


def summary(rows):
    groups = {}
    for row in rows:
        groups.setdefault((row["cost_model"], row["policy"]), []).append(row)
    lines = ["%-4s %-9s %13s %12s %17s %15s %9s" % (
        "cost", "policy", "completion_s", "predicted_s", "measured/predict", "multicast_scale",
        "verified")]
    medians = {}
    for (cost_model, policy), group in sorted(groups.items()):
        completion = fidelity.faithful_median(group, "completion_s")
        predicted = statistics.median(r["predicted_s"] for r in group)
        if completion is not None:
            medians[cost_model, policy] = completion
        lines.append("%-4s %-9s %13s %12.2f %17s %15.3f %9s %4d/%d faithful" % (
            cost_model, policy, "%.2f" % completion if completion else "-", predicted,
            "%.2f" % (completion / predicted) if completion else "-",
            statistics.fmean(r["multicast_scale"] for r in group), all(r["verified"] for r in group),
            sum(fidelity.faithful(r) for r in group), len(group)))
    for cost_model in sorted({c for c, _ in medians}):
        if (cost_model, "selmcast") in medians and (cost_model, "random") in medians:
            lines.append("%s: SELMCAST's completion is %.1f%% below random-p's" % (
                cost_model, 100 * (1 - medians[cost_model, "selmcast"] / medians[cost_model, "random"])))
    lines += [line for line in [fidelity.unfaithful_note(rows)] if line]
    lines.append("link rate %g Mbit/s; seconds are this machine's, ratios are the claim"
                 % rows[0]["link_mbps"])
    return "\n".join(lines)


def main(argv=None):
    finish_emulated_run(parse_args(argv), run, COLUMNS, plot_selmcast, summary,
                        "groups, meters or multicast flows", "some receiver's SHA-256 did not match")


if __name__ == "__main__":
    main()
