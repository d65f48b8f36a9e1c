"""Real data-parallel training over the emulated fabric: time to accuracy with the sums
returned by unicast or path-aware multicast and the gradients summed at the PS or in
the network, in streaming rounds, and as DDP runs it over PyTorch's Gloo.

    python -m experiments.train --workers 8 --rounds 30 \\
        --modes unicast+ps,multicast+ina,gloo,stream,stream-colocated --out results/train.csv

An 8x8 spine-leaf with 4 hosts per leaf, 20 Mbit/s links and an aggregator
host on every spine (9 Mbit/s of aggregation, as in `experiments.ina`). The
workers are h1..hN. The job is synchronous SGD on scikit-learn's digits with a
64-512-512-10 float32 MLP (1.2 MB of parameters, syncfabric/hosts/training/digits_mlp.py);
every gradient byte crosses the fabric. Each mode trains a fresh model with the same
seed, and every mode but gloo is a job (POST /jobs) whose workers each keep the model
and take the same step from the same sum (experiments/traffic/training_jobs.py):
- the papers' modes, PARAMETERS+GRADIENTS: one PS on the last host, the gradients
  straight to it (`ps`) or summed in the aggregators on the way (`ina`, GRID's plan),
  the sums back by `unicast` (the PS sends a copy to each worker) or by `multicast`
  (one reserved tree). ps_downlink_mb and ps_uplink_mb are the PS link's MB per round
  each way, counted at its switch port;
- `stream` and `stream-colocated`: PS shards on dedicated hosts or in the workers'
  own, as many as the round planner decides;
- `gloo` is DDP's communication: every worker all-reduces its gradient through
  torch.distributed (Gloo, in the same hosts) and takes the same step
  (experiments/traffic/gloo_training.py).
The CSV has one row per mode and round: the round's wall time split into compute,
the sum (aggregate_s, both directions; param_s is 0) and the step, the loss, the test
accuracy of the first worker's model and of the same job run in one process, whether
the round's model equals the same round computed in one process within the float32
tolerance, the drift from the one-process run, and the round the job predicts. The
summary compares every mode's time to the target accuracy with gloo's, each job's
median round with its prediction, and the PS's bytes per round. The PNG plots
test accuracy against wall-clock time.
"""

import statistics
import sys

from tqdm import tqdm

from experiments import fidelity
from experiments.cli import (announce_rate, build_fabric, comma_list, csv_out_argument,
                             experiment_parser, fabric_arguments, fabric_host_count,
                             finish_emulated_run, progress_printer)
from experiments.defaults import AGGREGATOR_SHARE, EMULATED_MAX_PSS, STREAM_MODES
from experiments.plots.training import plot_train
from experiments.testbed import FabricTestbed
from experiments.traffic.gloo_training import run_gloo_training
from experiments.traffic.jobs import PAPERS_MODES, mode_job
from experiments.traffic.training_jobs import run_job_training
from mininet_topos.description import describe
from mininet_topos.registry import fabric_hosts
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.hosts.training.digits_mlp import TrainingSetup

COLUMNS = ["mode", "workers", "model_mb", "round", "param_s", "compute_s", "aggregate_s",
           "update_s", "round_s", "elapsed_s", "loss", "reference_loss", "test_accuracy",
           "reference_accuracy", "error_to_tolerance", "verified", "drift", "param_repair_passes",
           "gradient_repair_passes", "aggregators_used", "link_mbps", "ps_downlink_mb",
           "ps_uplink_mb", "predicted_round_s"] + fidelity.COLUMNS
MODES = PAPERS_MODES + ("gloo",) + STREAM_MODES
DEFAULT_MODES = ["unicast+ps", "multicast+ps", "multicast+ina", "gloo", "stream",
                 "stream-colocated"]
BASELINE = "gloo"   # what data-parallel users run: DDP over Gloo


def parse_args(argv):
    parser = experiment_parser("experiments.train", __doc__)
    fabric_arguments(parser, hosts_per_leaf=4, pattern="all-to-all")
    parser.add_argument("--workers", type=int, default=8, help="number of workers")
    parser.add_argument("--rounds", type=int, default=30, help="training rounds per mode")
    parser.add_argument("--modes", type=comma_list(str, MODES), default=DEFAULT_MODES,
                        help="comma list of %s" % ", ".join(MODES))
    parser.add_argument("--aggregators", default="spines",
                        help="switches with an aggregator: leaves, spines, all or names joined by +")
    parser.add_argument("--aggregator-bw", type=float, default=None,
                        help="aggregator capacity, Mbit/s (default 0.45 x --bw: 9 at 20)")
    parser.add_argument("--rate-fraction", type=float, default=1.0,
                        help="the fraction of its job's planned rates each worker sends at "
                             "(the meters hold them to the plan)")
    parser.add_argument("--hidden", type=int, default=TrainingSetup.hidden,
                        help="width of the MLP's two hidden layers")
    parser.add_argument("--batch", type=int, default=TrainingSetup.batch,
                        help="samples per worker per round")
    parser.add_argument("--learning-rate", type=float, default=TrainingSetup.learning_rate)
    parser.add_argument("--momentum", type=float, default=TrainingSetup.momentum)
    parser.add_argument("--seed", type=int, default=TrainingSetup.seed)
    parser.add_argument("--target-accuracy", type=float, default=0.9,
                        help="accuracy whose time-to-reach the summary compares")
    csv_out_argument(parser, "train")
    args = parser.parse_args(argv)
    hosts = fabric_host_count(args)
    if not 1 <= args.workers < min(hosts, 65):
        parser.error("--workers must be between 1 and %d" % (min(hosts, 65) - 1))
    if args.rounds < 1 or args.hidden < 1 or args.batch < 1 or args.learning_rate <= 0:
        parser.error("--rounds, --hidden, --batch and --learning-rate must be positive")
    if args.aggregator_bw is None and args.bw is not None:
        args.aggregator_bw = round(AGGREGATOR_SHARE * args.bw, 2)
    if not 0 < args.rate_fraction <= 1 or args.aggregator_bw <= 0:
        parser.error("--rate-fraction must be in (0, 1] and --aggregator-bw positive")
    return args


def run(args):
    announce_rate(args)
    topo = build_fabric(args, aggregators=args.aggregators, aggregator_bw=args.aggregator_bw)
    hosts = fabric_hosts(topo)
    setup = TrainingSetup(workers=args.workers, hidden=args.hidden, batch=args.batch,
                          learning_rate=args.learning_rate, momentum=args.momentum, seed=args.seed)
    rows = []
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                       progress=progress_printer("train")) as bed:
        with tqdm(total=len(args.modes) * args.rounds, desc="rounds", unit="round",
                  file=sys.stderr) as bar:
            for mode in args.modes:
                bar.set_postfix_str(mode)
                results = run_mode(bed, hosts[-1], hosts[:args.workers], mode, setup,
                                   args.rounds, args.rate_fraction,
                                   on_round=lambda _number: bar.update(1))
                rows += [dict({key: result.get(key) for key in COLUMNS}, mode=mode,
                              workers=args.workers, model_mb=setup.parameter_count * 4 / 1e6,
                              link_mbps=args.bw)
                         for result in results]
        leftovers = bed.leftovers()
    return rows, leftovers


def run_mode(bed, ps, workers, mode, setup, rounds, rate_fraction, on_round):
    """One mode's rounds: DDP over Gloo, or the mode's job (a papers' mode with its PS
    on `ps`, whose link is watched)."""
    if mode == "gloo":
        return run_gloo_training(bed, workers, setup, rounds, on_round)
    view = FabricView(describe(bed.topo))
    request = mode_job(view, mode, workers, ps, [h for h in view.hosts if h not in workers],
                       setup.parameter_count, EMULATED_MAX_PSS)
    return run_job_training(bed, request, setup, rounds, on_round, rate_fraction,
                            watched=ps if mode in PAPERS_MODES else None)


def time_to_accuracy(rows, mode, target):
    """Wall-clock time at the first round of `mode` whose test accuracy reaches target."""
    return next((r["elapsed_s"] for r in rows if r["mode"] == mode and r["test_accuracy"] >= target),
                None)


def faithful_until(rows, mode, elapsed):
    """Whether every round of `mode` up to `elapsed` kept up (a time to accuracy is a sum)."""
    return all(fidelity.faithful(r) for r in rows if r["mode"] == mode and r["elapsed_s"] <= elapsed)


def summary(rows, target):
    def mean(mode, key):
        group = [r[key] for r in rows if r["mode"] == mode]
        return sum(group) / len(group)
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    lines = ["%-14s %8s %10s %12s %8s %13s %12s %9s" % (
        "mode", "param_s", "compute_s", "aggregate_s", "round_s", "time_to_%.0f%%" % (100 * target),
        "final_acc", "verified")]
    for mode in modes:
        reached = time_to_accuracy(rows, mode, target)
        final = [r for r in rows if r["mode"] == mode][-1]
        lines.append("%-14s %8.2f %10.3f %12.2f %8.2f %13s %12.4f %9s" % (
            mode, mean(mode, "param_s"), mean(mode, "compute_s"), mean(mode, "aggregate_s"),
            mean(mode, "round_s"), "%.1f s" % reached if reached is not None else "never",
            final["test_accuracy"], all(r["verified"] for r in rows if r["mode"] == mode)))
    baseline = time_to_accuracy(rows, BASELINE, target)
    for mode in modes:
        reached = time_to_accuracy(rows, mode, target)
        if mode != BASELINE and baseline and reached and faithful_until(rows, mode, reached) \
                and faithful_until(rows, BASELINE, baseline):
            lines.append("%s reaches %.0f%% in %.2fx %s's time (%s)" % (
                mode, 100 * target, reached / baseline, BASELINE,
                "%.2fx sooner" % (baseline / reached) if reached < baseline
                else "%.2fx later" % (reached / baseline)))
    lines += ps_link_lines(rows)
    lines += predicted_lines(rows)
    lines += [line for line in [fidelity.unfaithful_note(rows)] if line]
    same = all(r["test_accuracy"] == r["reference_accuracy"] for r in rows)
    lines.append("every mode's test accuracy equals the reference's at every round: %s" % same)
    return "\n".join(lines)


def predicted_lines(rows):
    """Per mode run as a job, its median round against the round its job predicts."""
    lines = []
    for mode in dict.fromkeys(r["mode"] for r in rows if r.get("predicted_round_s")):
        group = [r for r in rows if r["mode"] == mode]
        median = statistics.median(r["round_s"] for r in group)
        lines.append("%s: median round %.3f s, %.2fx the %.3f s its job predicts" % (
            mode, median, median / group[0]["predicted_round_s"], group[0]["predicted_round_s"]))
    return lines


def ps_link_lines(rows):
    """Per mode with a PS, what its link carried a round each way, in MB and in models
    (unicast returns one copy per worker up it; multicast one)."""
    lines = []
    for mode in dict.fromkeys(r["mode"] for r in rows if r.get("ps_uplink_mb") is not None):
        row = next(r for r in rows if r["mode"] == mode)
        lines.append("%s: the PS's link carried %.2f MB down and %.2f MB up a round (%.1f and "
                     "%.1f models of %.2f MB), counted at its switch" % (
                         mode, row["ps_downlink_mb"], row["ps_uplink_mb"],
                         row["ps_downlink_mb"] / row["model_mb"],
                         row["ps_uplink_mb"] / row["model_mb"], row["model_mb"]))
    return lines


def main(argv=None):
    args = parse_args(argv)
    finish_emulated_run(args, run, COLUMNS, plot_train,
                        lambda rows: summary(rows, args.target_accuracy),
                        "groups, meters, multicast or steering flows",
                        "some round's model differs from the one-process round beyond the tolerance")


if __name__ == "__main__":
    main()
