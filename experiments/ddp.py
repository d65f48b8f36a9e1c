"""PyTorch's DistributedDataParallel with and without the fabric's hook: time to accuracy
of real torch.nn models on the same emulated fabric, in the same run.

    python -m experiments.ddp --workers 8 --models mlp,cnn --steps 30 --out results/ddp.csv

An 8x8 spine-leaf with 4 hosts per leaf and an aggregator host on every spine; the
workers are h1..hN. Each model (mlp: digits_mlp's 64-512-512-10 in torch.nn; cnn: a
small CNN on the digits as 1x8x8 images; or --model package.module:factory) trains
with the same seed in every mode, in the workers' hosts
(experiments/traffic/ddp_training.py):
- `gloo`: DDP over Gloo, as users run it;
- `fabric-stream`: the same script with fabric_hook (its one added line), PS shards on
  dedicated hosts, aggregators on the spines;
- `fabric-colocated`: the same, with the shards in the workers' own hosts;
- `fabric-in-network` (asked for by --modes): the same, with the shards in the
  spines' aggregators;
- `ddp-backend`: the script with no hook, its process group init_process_group("fabric")
  (syncfabric/torch/backend.py), the job placed as fabric-stream's, its round as long as
  the model (DDP's first collective, the broadcast of its parameters, sizes it): each
  step's buckets are one round, whose stats judge its fidelity as the hook's do;
- `fsdp-gloo` and `fsdp-backend` (asked for by --modes): the model sharded by FSDP2's
  fully_shard on each layer, over Gloo and over the "fabric" backend.
The aggregator daemon runs on every host the controller places a part of the job on.
The CSV has a row per mode, model, worker count and step: the step's time (the slowest
rank's), its compute without communication, the communication it exposed, the loss,
the test accuracy, whether every rank's parameters are identical, and the fidelity
verdict. The summary compares time to --target-accuracy with gloo's, the step time
with max(compute, S/B), and the final accuracy with gloo's. The PNG plots test
accuracy against wall-clock time, one line per mode.
"""

import statistics
import sys
from contextlib import nullcontext

from tqdm import tqdm

from experiments import fidelity
from experiments.cli import (announce_rate, comma_list, csv_out_argument, experiment_parser,
                             fabric_arguments, fabric_host_count, finish_emulated_run,
                             fit_aggregator_rate, job_fabric, progress_printer)
from experiments.defaults import EMULATED_MAX_PSS
from experiments.plots.training import plot_ddp
from experiments.testbed import FabricTestbed
from experiments.train import time_to_accuracy
from experiments.traffic.ddp_training import (BACKEND_MODE, DEFAULT_MODES, FSDP_BACKEND,
                                              FSDP_GLOO, MODES, OVER_GLOO, PLACEMENT)
from experiments.traffic.gloo_peers import run_ranks
from experiments.traffic.jobs import (daemons_for, job_round_fidelity, planned_load_mbps,
                                     round_totals, stream_job)
from experiments.traffic.torch_models import gradient_floats, model_factory, model_name
from syncfabric.hosts.packets.gradient_wire import wire_mbit

COLUMNS = ["mode", "model", "workers", "step", "step_s", "compute_s", "comm_exposed_s", "loss",
           "test_accuracy", "ranks_identical", "elapsed_s", "bound_s", "link_mbps",
           "verified"] + fidelity.COLUMNS
BASELINE = "gloo"
HOOK_MODE = "fabric-stream"
# each backend mode's step is compared with the mode's that differs in its transport only
STEP_COMPARED = {BACKEND_MODE: (HOOK_MODE, "the hook's, placed alike"),
                 FSDP_BACKEND: (FSDP_GLOO, "FSDP2 over Gloo")}


def parse_args(argv):
    parser = experiment_parser("experiments.ddp", __doc__)
    fabric_arguments(parser, hosts_per_leaf=4, pattern="all-to-all")
    parser.add_argument("--workers", type=comma_list(int), default=[8], help="comma list of worker counts")
    parser.add_argument("--models", type=comma_list(str), default=["mlp", "cnn"],
                        help="comma list of mlp, cnn or package.module:factory")
    parser.add_argument("--model", action="append", default=[], metavar="PACKAGE.MODULE:FACTORY",
                        help="also train your own model: a factory of an nn.Module from "
                             "(N, 1, 8, 8) images to 10 logits (may be repeated)")
    parser.add_argument("--steps", type=int, default=30, help="training steps per mode")
    parser.add_argument("--modes", type=comma_list(str, MODES), default=list(DEFAULT_MODES),
                        help="comma list of %s (default: %s)" % (", ".join(MODES),
                                                                 ", ".join(DEFAULT_MODES)))
    parser.add_argument("--aggregator-bw", default="1x",
                        help="aggregator capacity: Mbit/s, or a multiple of the link rate (1x)")
    parser.add_argument("--max-pss", type=int, default=EMULATED_MAX_PSS,
                        help="most PS shards a job may use (each is a process)")
    parser.add_argument("--target-accuracy", type=float, default=0.9)
    parser.add_argument("--min-bytes", type=int, default=None,
                        help="ddp-backend: the smallest collective the fabric carries "
                             "(default: the backend's, FabricOptions.min_bytes)")
    csv_out_argument(parser, "ddp")
    args = parser.parse_args(argv)
    args.models = args.models + args.model
    try:
        for spec in args.models:
            model_factory(spec)
    except ValueError as error:
        parser.error(str(error))
    hosts = fabric_host_count(args)
    if any(not 2 <= n < min(hosts, 65) for n in args.workers) or args.steps < 1:
        parser.error("--workers must be between 2 and %d, --steps positive" % (min(hosts, 65) - 1))
    fit_aggregator_rate(parser, args, heaviest_job)
    return args


def heaviest_job(args, aggregator_bw):
    """The most Mbit/s of flows one of the run's jobs puts on the fabric at args.bw (for
    --bw auto): the fabric modes' as planned, Gloo's ring every worker at the link rate."""
    _topo, view, hosts = job_fabric(args, aggregator_bw)
    return max(count * args.bw if mode in OVER_GLOO else planned_load_mbps(
        view, hosts[:count], hosts[count:], gradient_floats(spec), args.max_pss,
        PLACEMENT[mode])
        for count in args.workers for spec in args.models for mode in args.modes)


def run(args):
    announce_rate(args)
    topo, view, hosts = job_fabric(args, args.aggregator_bw)
    runs = [(n, spec, mode) for n in args.workers for spec in args.models for mode in args.modes]
    rows = []
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                       progress=progress_printer("ddp")) as bed, \
            tqdm(total=len(runs) * args.steps, desc="steps", unit="step", file=sys.stderr) as bar:
        for workers, spec, mode in runs:
            bar.set_postfix_str("%s %s x%d" % (mode, model_name(spec), workers))
            rows += mode_rows(bed, view, hosts[:workers], spec, mode, args, bar)
        leftovers = bed.leftovers()
    return rows, leftovers


def mode_rows(bed, view, workers, spec, mode, args, bar):
    """One mode's steps of one model: the ranks in the workers' hosts, the daemons
    where the job will have parts, and each step's row (judged by the backlog while
    it ran, fidelity.Usage.during)."""
    floats = gradient_floats(spec)
    arguments = ["--model", spec, "--mode", mode, "--steps", str(args.steps)]
    served = nullcontext()
    if mode not in OVER_GLOO:
        request = stream_job(view, workers, [h for h in view.hosts if h not in workers],
                             floats, args.max_pss, PLACEMENT[mode])
        arguments += ["--controller", bed.management_url, "--shards", str(request["shards"])]
        if args.min_bytes is not None:
            arguments += ["--min-bytes", str(args.min_bytes)]
        served = daemons_for(bed, request, args.bw)
    with served:
        sampling = bed.sampler().start()
        results = run_ranks(bed, workers, "experiments.traffic.ddp_training", arguments,
                            on_row=lambda _row: bar.update(1))
        usage = sampling.stop()
    bound_s = wire_mbit(floats) / args.bw
    rows, elapsed = [], 0.0
    for result in results:
        elapsed += result["step_s"]
        during = usage.during(result["started_at"], result["started_at"] + result["step_s"])
        # over Gloo, or a step whose rounds some rank had not filed: the machine alone
        kept_up = job_round_fidelity(round_totals(result["rounds"]), during) \
            if all(result["rounds"]) else fidelity.verdict(None, None, None, 0, during)
        rows.append(dict(kept_up, mode=mode, model=model_name(spec), workers=len(workers),
                         step=result["step"], step_s=result["step_s"], compute_s=result["compute_s"],
                         comm_exposed_s=max(0.0, result["step_s"] - result["compute_s"]),
                         loss=result["loss"], test_accuracy=result["test_accuracy"],
                         ranks_identical=result["ranks_identical"], elapsed_s=elapsed,
                         bound_s=bound_s, link_mbps=args.bw, verified=result["ranks_identical"]))
    return rows


def summary(rows, target):
    lines = ["%-17s %-6s %3s %8s %9s %9s %8s %11s %9s %9s" % (
        "mode", "model", "n", "step_s", "compute_s", "exposed_s", "S/B_s", "time_to_%.0f%%"
        % (100 * target), "final_acc", "identical")]
    groups = {}
    for row in rows:
        groups.setdefault((row["workers"], row["model"]), {}).setdefault(row["mode"], []).append(row)
    for (workers, model), modes in groups.items():
        for mode, group in modes.items():
            step = fidelity.faithful_median(group, "step_s")
            reached = time_to_accuracy(group, mode, target)
            lines.append("%-17s %-6s %3d %8s %9.3f %9.3f %8.3f %11s %9.4f %9s" % (
                mode, model, workers, "%.3f" % step if step else "unfaithful",
                statistics.median(r["compute_s"] for r in group),
                statistics.median(r["comm_exposed_s"] for r in group), group[0]["bound_s"] or 0,
                "%.1f s" % reached if reached is not None else "never",
                group[-1]["test_accuracy"], all(r["ranks_identical"] for r in group)))
        lines += comparisons(modes, target)
    lines += [line for line in [fidelity.unfaithful_note(rows)] if line]
    return "\n".join(lines)


def comparisons(modes, target):
    """Each mode but gloo against gloo: time to accuracy and final accuracy (the fabric's
    modes), its step against max(compute, S/B), and (STEP_COMPARED) against the step of
    the mode that differs in its transport only."""
    lines, baseline = [], modes.get(BASELINE)
    for mode, group in modes.items():
        if mode == BASELINE:
            continue
        step = fidelity.faithful_median(group, "step_s")
        floor = max(statistics.median(r["compute_s"] for r in group), group[0]["bound_s"] or 0)
        if step:
            lines.append("%s %s x%d: step %.2fx max(compute, S/B)" % (
                mode, group[0]["model"], group[0]["workers"], step / floor))
        other, what = STEP_COMPARED.get(mode, (None, None))
        compared = fidelity.faithful_median(modes.get(other, []), "step_s")
        if step and compared:
            lines.append("  step %.3fx %s's (%s)" % (step / compared, other, what))
        if baseline is None or mode in OVER_GLOO:
            continue
        ours = time_to_accuracy(group, mode, target)
        theirs = time_to_accuracy(baseline, BASELINE, target)
        if ours and theirs:
            unfaithful = sum(not fidelity.faithful(r) for r in group + baseline
                             if r["elapsed_s"] <= (ours if r in group else theirs))
            lines.append("  reaches %.0f%% %.2fx sooner than gloo (%.1f s against %.1f s)%s"
                         % (100 * target, theirs / ours, ours, theirs,
                            " but %d step(s) on the way were not faithful: no claim" % unfaithful
                            if unfaithful else ", every step on the way faithful"))
        lines.append("  final accuracy %.4f against gloo's %.4f (%+.2f points)" % (
            group[-1]["test_accuracy"], baseline[-1]["test_accuracy"],
            100 * (group[-1]["test_accuracy"] - baseline[-1]["test_accuracy"])))
    return lines


def main(argv=None):
    args = parse_args(argv)
    finish_emulated_run(args, run, COLUMNS, plot_ddp, lambda rows: summary(rows, args.target_accuracy),
                        "groups, meters, multicast or steering flows",
                        "some step left the ranks' parameters different")


if __name__ == "__main__":
    main()
