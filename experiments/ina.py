"""In-network aggregation on an emulated fabric: one round of real gradients per
policy, steered by the INA app: GRID and its baselines (grid, no-ina, nearest,
switchml) for one PS, or with --ps InArt and its (inart, atp, lbmm, equal-split)
for a model split over several PSs.

    python -m experiments.ina --workers 8,16 --out results/ina.csv
    python -m experiments.ina --ps 2,4 --workers 16,24 --hetero --out results/inart.csv
    python -m experiments.ina --topo fattree,4 --ps 2 --workers 8 --hetero --aggregators all
    python -m experiments.ina --bench

An 8x8 spine-leaf with 4 hosts per leaf, or any fabric --topo names, with an
aggregator host on every switch of its top tier (--aggregators; capacity
--aggregator-bw, by default 0.45 x --bw: below the PS's ingress, its link). --bw
auto (the default) is a safe fraction of the all-to-all rate `make calibrate`
measured here; every row says whether the emulator kept up
(experiments/fidelity.py) and ratios use faithful rows only. Workers are h1..hN
(packed under the first switches, as a job's workers are when it is scheduled rack
by rack), the PS is the last host (with --ps P, the last P hosts are the PSs;
--hetero draws every switch-to-switch link's rate from U[0.5, 1.5] x --bw, seeded,
host links stay at --bw). For each worker count, PS count and policy a job (POST
/jobs with the PSs and the policy named) is planned and installed, and its rounds run
as every job's do (experiments/traffic/policy_rounds.py): whole-number gradients from
every worker, summed on the way as the policy plans, each sum checked and returned on
its shard's tree while later fragments still arrive. The CSV has per round the
communication time (the whole round, returns overlapped), the achieved minimum rate (a
worker's gradient on the wire over it), the PSs' ingress load, counted at their switch
ports, and the plan's rates; the PNG compares planned and measured minimum rates.

--bench plans GRID for 100 workers on a 64x64 spine-leaf (2 hosts per leaf,
100 Gbit/s links) with a random 20% of the switches programmable, 5 times,
and InArt's phase 2 for 50 workers and 4 PSs on an 8x8 spine-leaf (8 hosts
per leaf, 20 Mbit/s, aggregators of 9 Mbit/s on every switch), and prints one
JSON object with the median planning times.
"""

import json
import random
import statistics
import sys
import time
from pathlib import Path

from tqdm import tqdm

from experiments import fidelity
from experiments.cli import (announce_rate, build_fabric, comma_list, experiment_parser,
                             fabric_arguments, fabric_host_count, finish_emulated_run,
                             progress_printer)
from experiments.defaults import AGGREGATOR_SHARE
from experiments.plots.ina import plot_ina
from experiments.testbed import FabricTestbed
from experiments.traffic.policy_rounds import policy_job, run_policy_rounds
from mininet_topos.description import describe
from mininet_topos.registry import fabric_hosts
from mininet_topos.spineleaf import SpineLeafTopo
from syncfabric.decisions import inart_placement
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.ina_placement import plan
from syncfabric.decisions.ina_problem import (DEFAULT_POLICIES, GRID, NEAREST, NO_INA, POLICIES,
                                              InaProblem)
from syncfabric.decisions.inart_placement import ATP, INART, InartProblem, model_split

COLUMNS = ["policy", "workers", "ps_count", "round", "comm_time_s", "min_rate_mbps",
           "ps_ingress_mbps", "verified", "predicted_comm_time_s", "theta_mbps", "theta_lp_mbps",
           "theta_rounded_mbps", "theta_repaired_mbps", "repair_passes", "aggregators_used",
           "link_mbps"] + fidelity.COLUMNS
BENCH_FABRIC = {"spines": 64, "leaves": 64, "hosts_per_leaf": 2, "bw": 100000.0}


def parse_args(argv):
    parser = experiment_parser("experiments.ina", __doc__)
    fabric_arguments(parser, hosts_per_leaf=4, pattern="all-to-all")
    parser.add_argument("--workers", type=comma_list(int), default=[8, 16],
                        help="worker counts, comma-separated")
    parser.add_argument("--ps", type=comma_list(int), default=None,
                        help="PS counts, comma-separated: InArt's policies split the model "
                             "among them (default: one PS, GRID's policies)")
    parser.add_argument("--policies", type=comma_list(str, POLICIES + inart_placement.POLICIES),
                        default=None, help="default: %s (also: %s); with --ps: %s" % (
                            ",".join(DEFAULT_POLICIES), ",".join(sorted(set(POLICIES)
                                                                   - set(DEFAULT_POLICIES))),
                            ",".join(inart_placement.POLICIES)))
    parser.add_argument("--hetero", action="store_true",
                        help="switch-to-switch links at U[0.5, 1.5] x --bw (seeded; U[10, 30] "
                             "at 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --hetero link rates")
    parser.add_argument("--aggregators", default="top",
                        help="switches with an aggregator: top (a spine-leaf's spines, a "
                             "fat-tree's cores), tor (its leaves, edges), a tier of the fabric, "
                             "all, or names joined by + (default %(default)s)")
    parser.add_argument("--aggregator-bw", type=float, default=None,
                        help="aggregator capacity, Mbit/s (default 0.45 x --bw: 9 at 20)")
    parser.add_argument("--gradient-mb", type=float, default=1.0, help="gradient per worker, MB")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per policy")
    parser.add_argument("--bench", action="store_true",
                        help="only time GRID's and InArt's planning (no Mininet)")
    parser.add_argument("--bench-repeats", type=int, default=5, help="plans per planner, --bench")
    parser.add_argument("--out", type=Path, default=Path("results/ina.csv"))
    args = parser.parse_args(argv)
    if args.policies is None:
        args.policies = list(DEFAULT_POLICIES if args.ps is None else inart_placement.POLICIES)
    args.ps = args.ps or [1]
    hosts = fabric_host_count(args)
    if not 1 <= min(args.ps) <= max(args.ps) <= 8:
        parser.error("--ps must be between 1 and 8")
    if args.bench_repeats < 1:
        parser.error("--bench-repeats must be at least 1")
    if max(args.ps) > 1 and set(args.policies) & set(POLICIES):
        parser.error("several PSs need InArt's policies: %s" % ",".join(inart_placement.POLICIES))
    if not args.bench and not all(1 <= n <= hosts - max(args.ps) for n in args.workers):
        parser.error("--workers must be between 1 and %d (the PSs need hosts too)"
                     % (hosts - max(args.ps)))
    if args.aggregator_bw is None and not args.bench and args.bw is not None:
        args.aggregator_bw = round(AGGREGATOR_SHARE * args.bw, 2)
    if args.gradient_mb <= 0 or args.rounds < 1 or (args.aggregator_bw or 1) <= 0:
        parser.error("--gradient-mb, --rounds and --aggregator-bw must be positive")
    return args


def bench(repeats=5, workers=100, programmable=0.2, seed=0):
    rng = random.Random(seed)
    switches = (["spine%d" % i for i in range(1, BENCH_FABRIC["spines"] + 1)]
                + ["leaf%d" % i for i in range(1, BENCH_FABRIC["leaves"] + 1)])
    chosen = rng.sample(switches, round(programmable * len(switches)))
    view = FabricView(describe(SpineLeafTopo(aggregators=chosen, aggregator_bw=50000.0,
                                             **BENCH_FABRIC)))
    hosts = [h for h in view.hosts if not view.is_aggregator(h)]
    rng.shuffle(hosts)
    times, theta = [], {}
    for _ in tqdm(range(repeats), desc="plans", unit="plan", file=sys.stderr):
        started = time.perf_counter()
        theta[GRID] = plan(InaProblem(view.graph, hosts[:workers], hosts[workers], view.aggregators),
                           GRID).f
        times.append(time.perf_counter() - started)
    for policy in (NO_INA, NEAREST):
        theta[policy] = plan(InaProblem(view.graph, hosts[:workers], hosts[workers],
                                        view.aggregators), policy).f
    return {"workers": workers, "fabric": "%dx%d spine-leaf, %d%% programmable" % (
        BENCH_FABRIC["spines"], BENCH_FABRIC["leaves"], round(100 * programmable)),
        "plan_s": statistics.median(times), "theta_gbps": {p: t / 1000 for p, t in theta.items()},
        "inart": bench_inart(repeats)}


def bench_inart(repeats, workers=50, pss=4, seed=0):
    """InArt's phases on 8x8 (8 hosts per leaf, 20 Mbit/s, 9 Mbit/s aggregators on every
    switch): median seconds of phase 1 and of phase 2, and f of inart and atp."""
    view = FabricView(describe(SpineLeafTopo(spines=8, leaves=8, hosts_per_leaf=8, bw=20,
                                             aggregators="all", aggregator_bw=9)))
    hosts = [h for h in view.hosts if not view.is_aggregator(h)]
    random.Random(seed).shuffle(hosts)
    problem = InartProblem(view.graph, hosts[pss:pss + workers], hosts[:pss], view.aggregators)
    phase1, phase2 = [], []
    for _ in tqdm(range(repeats), desc="InArt plans", unit="plan", file=sys.stderr):
        started = time.perf_counter()
        split = model_split(problem).shares
        phase1.append(time.perf_counter() - started)
        started = time.perf_counter()
        result = inart_placement.plan(problem, INART, split=split)
        phase2.append(time.perf_counter() - started)
    return {"workers": workers, "pss": pss, "fabric": "8x8 spine-leaf, 8 hosts per leaf",
            "phase1_s": statistics.median(phase1), "phase2_s": statistics.median(phase2),
            "f_mbps": {INART: result.f, ATP: inart_placement.plan(problem, ATP).f}}


def hetero_rates(args):
    """Every switch-to-switch link's rate from U[0.5, 1.5] x --bw, seeded, in the order the
    fabric builds its links (a spine-leaf's leaf-major, a fat-tree's pod by pod): InArt's
    U[10, 30] Mbit/s at 20."""
    uniform = build_fabric(args)
    links = sum(uniform.isSwitch(a) and uniform.isSwitch(b) for a, b in uniform.links())
    rng = random.Random(args.seed)
    return [round(args.bw * rng.uniform(0.5, 1.5), 2) for _ in range(links)]


def run(args):
    announce_rate(args)
    topo = build_fabric(args, bw=hetero_rates(args) if args.hetero else args.bw,
                        host_bw=args.bw, aggregators=args.aggregators,
                        aggregator_bw=args.aggregator_bw)
    hosts = fabric_hosts(topo)
    rows = []
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                       progress=progress_printer("ina")) as bed:
        jobs = [(n, p, policy) for n in args.workers for p in args.ps for policy in args.policies]
        for n, p, policy in tqdm(jobs, desc="jobs", unit="job", file=sys.stderr):
            job, answer, results = run_policy_rounds(
                bed, policy_job(hosts[:n], hosts[-p:], policy, args.gradient_mb), args.rounds,
                args.bw)
            for number, result in enumerate(results, start=1):
                rows.append(dict(
                    result, policy=policy, workers=n, ps_count=p, round=number,
                    predicted_comm_time_s=job["predicted_round_s"],
                    theta_mbps=answer["theta_mbps"], theta_lp_mbps=answer["theta_lp_mbps"],
                    theta_rounded_mbps=answer["theta_rounded_mbps"],
                    theta_repaired_mbps=answer["theta_repaired_mbps"],
                    aggregators_used=len({a["aggregator"] for a in answer["aggregates"]}),
                    link_mbps=args.bw))
        leftovers = bed.leftovers()
    return rows, leftovers


def summary(rows):
    lines = ["%-11s %7s %3s %12s %13s %15s %8s" % (
        "policy", "workers", "ps", "comm_time_s", "min_rate_mbps", "ps_ingress_mbps", "verified")]
    medians = {}
    for key in sorted({(r["workers"], r["ps_count"], r["policy"]) for r in rows}):
        group = [r for r in rows if (r["workers"], r["ps_count"], r["policy"]) == key]
        median = fidelity.faithful_median(group, "comm_time_s")
        if median is not None:
            medians[key] = median
        lines.append("%-11s %7d %3d %12s %13.2f %15.2f %8s %4d/%d faithful" % (
            key[2], key[0], key[1], "%.2f" % median if median else "-",
            statistics.median(r["min_rate_mbps"] for r in group),
            statistics.median(r["ps_ingress_mbps"] for r in group), all(r["verified"] for r in group),
            sum(fidelity.faithful(r) for r in group), len(group)))
    comparisons = [(GRID, NO_INA), (GRID, NEAREST), (INART, ATP), (INART, inart_placement.LBMM),
                   (INART, inart_placement.EQUAL_SPLIT)]
    for workers, pss in sorted({(w, p) for w, p, _policy in medians}):
        for ours, other in comparisons:
            if (workers, pss, ours) in medians and (workers, pss, other) in medians:
                lines.append("%d workers, %d PS: %s's communication time is %.1f%% below %s's" % (
                    workers, pss, ours, 100 * (1 - medians[workers, pss, ours]
                                               / medians[workers, pss, other]), other))
    lines += [line for line in [fidelity.unfaithful_note(rows)] if line]
    lines.append("link rate %g Mbit/s; seconds are this machine's, ratios are the claim"
                 % rows[0]["link_mbps"])
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    if args.bench:
        print(json.dumps(bench(args.bench_repeats)))
        return
    finish_emulated_run(args, run, COLUMNS, plot_ina, summary, "steering flows or meters",
                        "some round's sum at the PS did not match the exact sum")


if __name__ == "__main__":
    main()
