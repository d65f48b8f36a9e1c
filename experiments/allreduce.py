"""One synchronous round's communication, ours against what data-parallel users run:
PyTorch's torch.distributed (Gloo) in the same hosts, on the same fabric, in one run.

    python -m experiments.allreduce --workers 4,8,16 --rounds 5 --out results/allreduce.csv

An 8x8 spine-leaf with 4 hosts per leaf, or any fabric --topo names (fattree,4), with
an aggregator host on every switch of its top tier (spines, cores; --aggregator-bw, a
comma list, sweeps their capacity: a fresh fabric each; 0 is a fabric without
aggregators). The
workers are h1..hN, the PS the last host; the model is the training MLP's float32
parameters (1.2 MB; --hidden sets its size). Modes:
- gloo-allreduce: the workers all-reduce their gradients (DDP's step), Gloo
  bound to the data-plane interface, routed by our fabric app
  (syncfabric/hosts/training/gloo_peers.py);
- gloo-ps: Gloo reduce from the workers to the PS, then broadcast from it;
- unicast+ps, multicast+ina: the papers' rounds as jobs (POST /jobs), one PS on the
  last host: the gradients straight to it and a copy of the sums back to each worker,
  or the gradients summed in the aggregators and the sums back on one tree;
- stream, stream-colocated, stream-in-network: the streaming round as users run it,
  a job (POST /jobs, docs/jobs.md) with the aggregator daemon where it sums outside
  the workers and the library in the workers: P PS shards (as
  syncfabric/decisions/round_planner.py decides, at most --max-pss) on dedicated
  hosts (the hosts after the workers), in the workers' own hosts, or in the top tier's
  aggregators (summed in the switch, as SwitchML does), the gradients aggregated on
  the way in, each shard's
  sum multicast back on its reserved tree fragment by fragment while later
  fragments still arrive. A round's time is its slowest worker's. `bound_s` is the
  planner's lower bound on any round on the fabric, `predicted_s` its plan's.
Every round's result is checked: Gloo's sums and the jobs' element for element
against the exact one (whole-number gradients), experiments.train's as it checks
them. The CSV has
one row per mode, worker count, aggregator capacity and round; `line_rate_s` is
S/B, the time each worker's link needs to carry the model once. The PNG plots the
median communication time against workers, one line per mode and one panel per
aggregator capacity, with S/B.
"""

import sys

from tqdm import tqdm

from experiments import fidelity
from experiments.cli import (announce_rate, comma_list, csv_out_argument, experiment_parser,
                             fabric_arguments, fabric_host_count, finish_emulated_run,
                             fit_auto_rate, job_fabric, progress_printer, rate_mbps)
from experiments.defaults import (AGGREGATOR_SHARE, EMULATED_MAX_PSS, JOB_START_S, ROUNDS_APART,
                                 STREAM_MODES, STREAM_PLACEMENT)
from experiments.plots.training import plot_allreduce
from experiments.platform_capacity import capacity_warning
from experiments.testbed import FabricTestbed
from experiments.traffic import gloo_peers
from experiments.traffic.jobs import (job_round_fidelity, job_rounds, mode_job, papers_plan,
                                     plan_load_mbps, planned_load_mbps, run_job, served_job)
from syncfabric.hosts.training.digits_mlp import TrainingSetup

COLUMNS = ["mode", "workers", "pss", "aggregator_bw", "model_mb", "round", "comm_s",
           "line_rate_s", "bound_s", "verified", "repair_passes"] + fidelity.COLUMNS + [
    "predicted_s", "link_mbps"]
GLOO_MODES = {"gloo-allreduce": "allreduce", "gloo-ps": "ps"}
PAPERS_MODES = ("unicast+ps", "multicast+ina")   # of jobs.PAPERS_MODES
MODES = tuple(GLOO_MODES) + PAPERS_MODES + STREAM_MODES
PS_HOST_MODES = {"gloo-ps", "stream"} | set(PAPERS_MODES)   # these need a host beside the workers
IN_AGGREGATOR_MODES = {"multicast+ina", "stream-in-network"}   # these sum in the aggregators


def parse_args(argv):
    parser = experiment_parser("experiments.allreduce", __doc__)
    fabric_arguments(parser, hosts_per_leaf=4, pattern="all-to-all")
    parser.add_argument("--workers", type=comma_list(int), default=[4, 8, 16],
                        help="comma list of worker counts")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per mode and worker count")
    parser.add_argument("--modes", type=comma_list(str, MODES), default=list(MODES),
                        help="comma list of %s" % ", ".join(MODES))
    parser.add_argument("--aggregator-bw", type=comma_list(str), default=None,
                        help="comma list of aggregator capacities, each on a fresh fabric: "
                             "Mbit/s, or a multiple of the link rate such as 1x; 0 for none "
                             "(default 0.45x)")
    parser.add_argument("--max-pss", type=int, default=EMULATED_MAX_PSS,
                        help="most PS shards the stream modes' planner may use (each is a "
                             "process; default %(default)s, what 2 cores emulate faithfully)")
    parser.add_argument("--hidden", type=int, default=TrainingSetup.hidden,
                        help="width of the MLP's two hidden layers (sets the model's size)")
    csv_out_argument(parser, "allreduce")
    args = parser.parse_args(argv)
    hosts = args.host_count = fabric_host_count(args)   # modes_for asks it often
    if any(not 2 <= n <= min(hosts, 64) for n in args.workers):
        parser.error("every --workers count must be between 2 and %d" % min(hosts, 64))
    if args.rounds < 1 or args.hidden < 1 or args.max_pss < 1:
        parser.error("--rounds, --hidden and --max-pss must be positive")
    try:
        per_link_mbps = [rate_mbps(item, 1.0) for item in args.aggregator_bw or ["1x"]]
    except ValueError:
        parser.error("--aggregator-bw must be a comma list of Mbit/s or multiples like 1x")
    if min(per_link_mbps) < 0:
        parser.error("--aggregator-bw must be at least 0")
    summing = sorted(set(args.modes) & IN_AGGREGATOR_MODES)
    if 0 in per_link_mbps and summing:
        parser.error("--aggregator-bw 0 builds a fabric without aggregators, where %s cannot "
                     "run: leave them out of --modes" % " and ".join(summing))
    if args.bw is not None:
        fit_auto_rate(args, lambda: heaviest_round(args))
        args.aggregator_bw = aggregator_rates(args)
    return args


def aggregator_rates(args):
    """--aggregator-bw in Mbit/s at args.bw (ValueError if an item is neither)."""
    return [rate_mbps(item, args.bw) for item in args.aggregator_bw or ["%gx" % AGGREGATOR_SHARE]]


def heaviest_round(args):
    """The most Mbit/s of flows one of the run's rounds puts on the fabric at args.bw (for
    --bw auto): a job's as planned; Gloo's hosts each sending at the link rate (the
    workers, and the PS for gloo-ps)."""
    heaviest = 0.0
    for aggregator_bw in aggregator_rates(args):
        _topo, view, hosts = job_fabric(args, aggregator_bw)
        for count in args.workers:
            floats = TrainingSetup(workers=count, hidden=args.hidden).parameter_count
            for mode in modes_for(args, count):
                heaviest = max(heaviest, round_load_mbps(args, view, hosts, count, floats, mode))
    return heaviest


def round_load_mbps(args, view, hosts, count, floats, mode):
    """The Mbit/s of flows a round of `mode` puts on the fabric (heaviest_round)."""
    if mode in STREAM_MODES:
        return planned_load_mbps(view, hosts[:count], hosts[count:], floats, args.max_pss,
                                 STREAM_PLACEMENT[mode])
    if mode in PAPERS_MODES:
        return plan_load_mbps(papers_plan(view, mode, hosts[-1], hosts[:count], floats))
    return args.bw * (count + (mode in PS_HOST_MODES))


def gloo_rows(bed, modes, workers, ps, floats, rounds, bar):
    """The Gloo modes' rows, one run of the peers for all of them."""
    patterns = [GLOO_MODES[mode] for mode in modes if mode in GLOO_MODES]
    if not patterns:
        return []
    mode_of = {pattern: mode for mode, pattern in GLOO_MODES.items()}
    sampling = bed.sampler().start()
    results = gloo_peers.run_in_fabric(bed, workers, ps if "ps" in patterns else None, floats,
                                       rounds, patterns, on_row=lambda _row: bar.update(1))
    kept_up = fidelity.verdict(None, None, None, 0, sampling.stop())
    return [dict(kept_up, mode=mode_of[r["pattern"]], round=r["round"], comm_s=r["comm_s"],
                 verified=r["verified"], repair_passes=0,
                 pss=1 if r["pattern"] == "ps" else 0) for r in results]


def job_rows(bed, mode, request, rounds, link_mbps, bar):
    """A job's rounds as users run them: the daemon on every host the job sums in that is
    not a worker, the library in every worker (a warning if the job is more than the
    machine carries at link_mbps). Each round is judged by the backlog while it ran
    (fidelity.Usage.during)."""
    with served_job(bed, request, link_mbps) as job:
        sampling = bed.sampler().start()
        results = job_rounds(run_job(bed, job, rounds, start_in_s=JOB_START_S,
                                     every_s=ROUNDS_APART * job["predicted_round_s"]))
        usage = sampling.stop()
    bar.update(rounds)
    return [dict(job_round_fidelity(r, usage.during(r["started_at"], r["ended_at"])), mode=mode,
                 round=r["round"], comm_s=r["comm_s"], verified=r["exact"],
                 pss=len(job["shards"]), bound_s=job["lower_bound_s"],
                 repair_passes=r["repair_requests"], predicted_s=job["predicted_round_s"])
            for r in results]


def modes_for(args, count):
    """The modes a round of `count` workers runs: with every host a worker, those that
    need a host beside them (PS_HOST_MODES) have none, and are left out."""
    if count < args.host_count:
        return args.modes
    return [mode for mode in args.modes if mode not in PS_HOST_MODES]


def run(args):
    announce_rate(args)
    warning = capacity_warning(args.bw, max(args.workers))
    if warning:
        print(warning, file=sys.stderr)
    for count in args.workers:
        left_out = sorted(set(args.modes) - set(modes_for(args, count)))
        if left_out:
            print("%d workers take every host, leaving none for %s: left out (more "
                  "--hosts-per-leaf would give them one)" % (count, ", ".join(left_out)),
                  file=sys.stderr)
    rows, leftovers = [], []
    total = len(args.aggregator_bw) * args.rounds * sum(len(modes_for(args, count))
                                                        for count in args.workers)
    with tqdm(total=total, desc="rounds", unit="round", file=sys.stderr) as bar:
        for aggregator_bw in args.aggregator_bw:
            topo, view, hosts = job_fabric(args, aggregator_bw)
            with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                               progress=progress_printer("allreduce")) as bed:
                for count in args.workers:
                    setup = TrainingSetup(workers=count, hidden=args.hidden)
                    workers, ps, modes = hosts[:count], hosts[-1], modes_for(args, count)
                    bar.set_postfix_str("%d workers, gloo" % count)
                    measured = gloo_rows(bed, modes, workers, ps, setup.parameter_count,
                                         args.rounds, bar)
                    for mode in (m for m in modes if m not in GLOO_MODES):
                        bar.set_postfix_str("%d workers, %s" % (count, mode))
                        request = mode_job(view, mode, workers, ps, hosts[count:],
                                           setup.parameter_count, args.max_pss)
                        measured += job_rows(bed, mode, request, args.rounds, args.bw, bar)
                    model_bytes = setup.parameter_count * 4
                    rows += [dict({"bound_s": None, "predicted_s": None}, **row, workers=count,
                                  aggregator_bw=aggregator_bw, model_mb=model_bytes / 1e6,
                                  link_mbps=args.bw, line_rate_s=model_bytes * 8 / (args.bw * 1e6))
                             for row in measured]
                leftovers += bed.leftovers()
    return rows, leftovers


def summary(rows):
    """Median communication per mode and worker count over faithful rows, and each
    mode's ratio to Gloo's all-reduce measured in the same run."""
    lines = ["%-16s %7s %13s %9s %11s %9s" % ("mode", "workers", "aggregator_bw", "comm_s",
                                               "x_line_rate", "verified")]
    groups = {}
    for row in rows:
        groups.setdefault((row["aggregator_bw"], row["workers"], row["mode"]), []).append(row)
    medians = {key: fidelity.faithful_median(group, "comm_s") for key, group in groups.items()}
    for (aggregator_bw, workers, mode), group in groups.items():
        median = medians[(aggregator_bw, workers, mode)]
        lines.append("%-16s %7d %13g %9s %11s %9s" % (
            mode, workers, aggregator_bw, "%.2f" % median if median else "unfaithful",
            "%.2f" % (median / group[0]["line_rate_s"]) if median else "-",
            all(r["verified"] for r in group)))
    for (aggregator_bw, workers, mode), median in medians.items():
        gloo = medians.get((aggregator_bw, workers, "gloo-allreduce"))
        if mode != "gloo-allreduce" and median and gloo:
            lines.append("%d workers, aggregators %g Mbit/s: %s takes %.2fx gloo-allreduce's time"
                         % (workers, aggregator_bw, mode, median / gloo))
    lines += [line for line in [fidelity.unfaithful_note(rows)] if line]
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    finish_emulated_run(args, run, COLUMNS, plot_allreduce, summary,
                        "groups, meters, multicast or steering flows",
                        "some round's result differs from the exact one")


if __name__ == "__main__":
    main()
