"""torch.distributed's collectives through the "fabric" backend and through Gloo, on the
same hosts and links, in the same run: what a program gains by naming the fabric's
backend, collective by collective and size by size.

    python -m experiments.collectives --workers 8,16 --sizes 1,4,25 --out results/collectives.csv

An 8x8 spine-leaf with 4 hosts per leaf (aggregators on the spines); the ranks are
h1..hN (experiments/traffic/collective_ranks.py). Each backend runs all_reduce,
broadcast, all_gather_into_tensor and reduce_scatter_tensor at each size (MB: the
tensor of all_reduce and broadcast, the gathered output, the scattered input), and at
one size below the backend's threshold (min_bytes), where a call goes to Gloo through
the fabric's group: the cost of deciding, called --below-repeats times (short calls on
a busy machine vary by a fifth from one to the next under either backend, and a run's
pace drifts by as much over tens of seconds). There the fabric's ranks make each call
on a Gloo group of their own too, right before or after it (`gloo-beside` rows), and
the fabric's time is set against that, as the median of the pairs' own ratios: the
two calls' only difference is the backend named, in the same processes beside the same
background. The
fabric's job is placed as experiments.ddp's fabric-stream (shards on hosts beside the
workers, whose daemons serve them), its round as long as the smallest size the fabric
carries (or an eighth of the largest): a longer call streams through several rounds,
each spread over every shard.

A run that fails (a rank's error) is said on stderr, with where every rank's stderr was
kept; its calls before the failed one, and the other runs' rows, still count.
The CSV has a row per backend, worker count, collective, size and repeat: the slowest
rank's time, whether every rank's result was exact, whether the call went through the
fabric, and the fidelity verdict (the machine's backlog while it ran). The summary
gives each collective's time against Gloo's (the median of the repeats) and the
crossover: the smallest size the fabric carried from which it is never slower. To find
it, the --crossover-sizes go through the fabric even below the threshold (the ranks
lower their group's min_bytes for them), each call beside its ranks' Gloo group's as
below the threshold: the measurement MIN_BYTES is set from (docs/pytorch.md).
Each group's first calls, an all-reduce as long as the fabric's round in which the
fabric's group makes its job, and (unless --no-gather-job) an all-gather of the
smallest size it carries, in which it makes its gather job (syncfabric/torch/gather_rounds.py),
and (unless --no-scatter-job) a reduce-scatter as long, in which it makes its scatter job
(syncfabric/torch/scatter_rounds.py), are timed apart: `first_call_s` in each of the group's
rows and a line of the summary, not a repeat of any collective; where the fabric's
group went to Gloo (its job refused, or unable to run), `gloo_only` says why, as do
stderr and that line. It fills its round, so
the calls below the threshold after it find no round begun and go to Gloo (a short
call that follows a begun round goes on in it, through the fabric: call_stream.py).
"""

import argparse
import statistics
import sys
from contextlib import nullcontext

from tqdm import tqdm

from experiments import fidelity
from experiments.cli import (announce_rate, comma_list, csv_out_argument, experiment_parser,
                             fabric_arguments, fabric_host_count, finish_emulated_run,
                             fit_aggregator_rate, job_fabric, progress_printer)
from experiments.defaults import BORROW_POLICY, EMULATED_MAX_PSS
from experiments.plots.collectives import plot_collectives
from experiments.testbed import FabricTestbed
from experiments.traffic.collective_ranks import COLLECTIVES, FIRST_CALL, repeats_of
from experiments.traffic.gloo_peers import RanksFailed, run_ranks
from experiments.traffic.jobs import daemons_for, planned_load_mbps, stream_job
from mininet_topos.data_plane import DataPlane
from syncfabric.torch.backend import MIN_BYTES

COLUMNS = ["backend", "workers", "collective", "size_mb", "repeat", "seconds",
           "through_fabric", "verified", "link_mbps", "crossover_mb",
           "first_call_s", "gloo_only"] + fidelity.COLUMNS
BACKENDS = ("gloo", "fabric")
BESIDE = "gloo-beside"   # the fabric's ranks' Gloo group, below the threshold
PLACEMENT = "dedicated"
BELOW_MB = MIN_BYTES / 2 / 2 ** 20   # a size the fabric's group leaves to Gloo
BELOW_REPEATS = 30                   # calls of it (--below-repeats), each with BESIDE's
CROSSOVER_MB = [0.0625, 0.25, 0.5]   # carried below the threshold too: the crossover


def parse_args(argv):
    parser = experiment_parser("experiments.collectives", __doc__)
    fabric_arguments(parser, hosts_per_leaf=4, pattern="all-to-all")
    parser.add_argument("--workers", type=comma_list(int), default=[8],
                        help="comma list of worker counts")
    parser.add_argument("--sizes", type=comma_list(float), default=[1.0, 4.0, 25.0],
                        help="comma list of sizes in MB (a size below the threshold is added)")
    parser.add_argument("--repeats", type=int, default=3, help="calls of each size")
    parser.add_argument("--below-repeats", type=int, default=BELOW_REPEATS,
                        help="calls of the size below the threshold, Gloo's under both "
                        "backends, the fabric's each beside a call of its ranks' own Gloo "
                        "group: tenths of a second each, whose ratio needs many pairs "
                        "(default %d)" % BELOW_REPEATS)
    parser.add_argument("--crossover-sizes", type=comma_list(float), default=CROSSOVER_MB,
                        help="comma list of sizes in MB the fabric carries even below its "
                        "threshold, each call beside its ranks' Gloo group's: where it "
                        "begins to beat Gloo (default %s)" % ",".join(map(str, CROSSOVER_MB)))
    parser.add_argument("--aggregator-bw", default="1x",
                        help="aggregator capacity: Mbit/s, or a multiple of the link rate (1x)")
    parser.add_argument("--max-pss", type=int, default=EMULATED_MAX_PSS,
                        help="most PS shards the job may use (each is a process)")
    parser.add_argument("--gather-job", action=argparse.BooleanOptionalAction, default=True,
                        help="the fabric's all-gathers through a gather job of the group's "
                        "(FabricOptions.gather_job, the default), booked with the group's "
                        "job as one (turns_with: docs/jobs.md; measured in docs/pytorch.md); "
                        "--no-gather-job: through the group's job's rounds")
    parser.add_argument("--scatter-job", action=argparse.BooleanOptionalAction, default=True,
                        help="the fabric's reduce-scatters through a scatter job of the "
                        "group's (FabricOptions.scatter_job, the default), each shard's sums "
                        "kept in its rank's host, booked with the group's job as one; "
                        "--no-scatter-job: through the group's job's rounds")
    parser.add_argument("--borrow", action="store_true",
                        help="the fabric lends what is idle: policy fair with borrowing, "
                        "the switch ports' traffic classes built (docs/sharing.md); with "
                        "the gather job (the default), it and the group's all-reduce job each "
                        "borrow what the other leaves while it computes or waits")
    csv_out_argument(parser, "collectives")
    args = parser.parse_args(argv)
    hosts = fabric_host_count(args)
    if any(not 2 <= n < min(hosts, 65) for n in args.workers) or args.repeats < 1 \
            or args.below_repeats < 1 or any(size <= 0 for size in args.sizes):
        parser.error("--workers must be between 2 and %d, --repeats, --below-repeats and "
                     "--sizes positive"
                     % (min(hosts, 65) - 1))
    if not any(size > BELOW_MB for size in args.sizes):
        parser.error("--sizes needs a size above %g MB, below which every call goes to Gloo"
                     % BELOW_MB)
    if {BELOW_MB, *args.sizes} & set(args.crossover_sizes) \
            or any(size <= 0 for size in args.crossover_sizes):
        parser.error("--crossover-sizes must be positive and apart from --sizes and %g MB "
                     "(the size below the threshold): a size is measured one way" % BELOW_MB)
    args.sizes = sorted({BELOW_MB, *args.sizes})
    fit_aggregator_rate(parser, args, heaviest_job)
    return args


def heaviest_job(args, aggregator_bw):
    """The most Mbit/s one backend's calls put on the fabric at args.bw (for --bw auto):
    the fabric's job as planned, Gloo's ring every worker at the link rate."""
    _topo, view, hosts = job_fabric(args, aggregator_bw)
    return max(max(count * args.bw, planned_load_mbps(
        view, hosts[:count], hosts[count:], round_bytes(args) // 4, args.max_pss, PLACEMENT))
        for count in args.workers)


def round_bytes(args):
    """The fabric's job's round, in whole float32s: the smallest size it carries, or an
    eighth of the largest if more, so that the longest call is a few long rounds rather
    than many short ones (each with its fixed costs; at most ROUNDS_IN_FLIGHT of a call's
    are open at once, fabric_worker.py). Measured with these rounds: docs/pytorch.md."""
    return 4 * (int(max(smallest_carried_mb(args), max(args.sizes) / 8) * 2 ** 20) // 4)


def smallest_carried_mb(args):
    """The smallest size measured that the fabric carries: the gather job's round holds
    a slice of it from every rank (a round carries a whole slice whatever the call's:
    the first all-gather's size sets it)."""
    return min(size for size in args.sizes if size > BELOW_MB)


def run(args):
    announce_rate(args)
    topo, view, hosts = job_fabric(args, args.aggregator_bw)
    runs = [(n, backend) for n in args.workers for backend in BACKENDS]
    rows = []
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                       progress=progress_printer("collectives"),
                       data_plane=DataPlane(traffic_classes=args.borrow)) as bed, \
            tqdm(total=sum(calls_of(args, backend) for _n, backend in runs), desc="calls",
                 unit="call", file=sys.stderr) as bar:
        if args.borrow:
            bed.client.put("/fabric/policy", BORROW_POLICY)
        for workers, backend in runs:
            bar.set_postfix_str("%s x%d" % (backend, workers))
            try:
                rows += backend_rows(bed, view, hosts[:workers], backend, args, bar)
            except RuntimeError as error:   # the other runs' rows still count
                tqdm.write("collectives: %s among %d workers failed, no rows from it: %s"
                           % (backend, workers, str(error)[:2000]), file=sys.stderr)
        leftovers = bed.leftovers()
    for row in rows:
        row["crossover_mb"] = crossover_mb(rows, row["workers"], row["collective"])
    return rows, leftovers


def calls_of(args, backend):
    """The rows one backend's run prints: each collective's calls of every size, the
    fabric's twice below the threshold and at the crossover sizes (its group's and
    BESIDE's), and the first call."""
    calls = 0
    for size in args.sizes:
        twice = backend == "fabric" and size <= BELOW_MB
        calls += repeats_of(size, args.repeats, BELOW_MB, args.below_repeats) * (1 + twice)
    calls += len(args.crossover_sizes) * args.repeats * (1 + (backend == "fabric"))
    return len(COLLECTIVES) * calls + 1


def backend_rows(bed, view, workers, backend, args, bar):
    """One backend's calls among `workers`: the ranks in their hosts (and, for the
    fabric, the daemons of the hosts its job is placed on), a row per call."""
    arguments = ["--backend", backend, "--sizes", ",".join(map(repr, args.sizes)),
                 "--repeats", str(args.repeats), "--below-mb", repr(BELOW_MB),
                 "--below-repeats", str(args.below_repeats),
                 "--crossover-sizes", ",".join(map(repr, args.crossover_sizes)),
                 "--first-mb", repr(round_bytes(args) / 2 ** 20),
                 "--first-gather-mb", repr(smallest_carried_mb(args))]
    if backend == "fabric":
        request = stream_job(view, workers, [h for h in view.hosts if h not in workers],
                             round_bytes(args) // 4, args.max_pss, PLACEMENT)
        arguments += ["--controller", bed.management_url, "--shards", str(request["shards"]),
                      "--placement", PLACEMENT, "--capacity-bytes", str(round_bytes(args))]
        arguments += ["--gather-job" if args.gather_job else "--no-gather-job",
                      "--scatter-job" if args.scatter_job else "--no-scatter-job",
                      "--beside-gloo"]
        served = daemons_for(bed, request, args.bw)
    else:
        served = nullcontext()
    with served:
        sampling = bed.sampler().start()
        try:
            results = run_ranks(bed, workers, "experiments.traffic.collective_ranks",
                                arguments, on_row=lambda _row: bar.update(1))
        except RanksFailed as error:   # the calls before the failed one still count
            tqdm.write("collectives: %s among %d workers failed after %d calls: %s"
                       % (backend, len(workers), len(error.rows), str(error)[:3000]),
                       file=sys.stderr)
            results = error.rows
    usage = sampling.stop()
    first = next((r for r in results if r["collective"] == FIRST_CALL), {})
    first_s, gloo_only = first.get("seconds"), first.get("gloo_only")
    if gloo_only:
        tqdm.write("collectives: the fabric's group of %d went to Gloo: %s"
                   % (len(workers), gloo_only), file=sys.stderr)
    rows = []
    for result in results:
        if result["collective"] == FIRST_CALL:
            continue
        during = usage.during(result["started_at"], result["started_at"] + result["seconds"])
        beside = result.get("beside")   # not the group whose first call and fate were said
        rows.append(dict(fidelity.verdict(None, None, None, 0, during),
                         backend=BESIDE if beside else backend,
                         workers=len(workers), collective=result["collective"],
                         size_mb=result["size_mb"], repeat=result["repeat"],
                         seconds=result["seconds"], through_fabric=result["through_fabric"],
                         verified=result["verified"], link_mbps=args.bw,
                         first_call_s=None if beside else first_s,
                         gloo_only=None if beside else gloo_only))
    return rows


def medians(rows, workers, collective):
    """{(backend, size_mb): the median faithful time} of one collective's calls."""
    times = {}
    for row in rows:
        if row["workers"] == workers and row["collective"] == collective \
                and fidelity.faithful(row):
            times.setdefault((row["backend"], row["size_mb"]), []).append(row["seconds"])
    return {key: statistics.median(values) for key, values in times.items()}


def gloo_baseline(times, size):
    """(backend, median) the fabric's time at `size` is set against: BESIDE's, the same
    ranks' Gloo group call by call, where the fabric's run measured it (below the
    threshold), else Gloo's own run's. times: medians()'s."""
    backend = BESIDE if (BESIDE, size) in times else "gloo"
    return backend, times.get((backend, size))


def fabric_ratio(rows, workers, collective, size, times):
    """The fabric's time at `size` over Gloo's (gloo_baseline; times: medians()'s), None
    without both: against BESIDE the median of each pair's own ratio (a call and the
    Gloo group's right beside it, faithful both), which the machine's drift from one
    pair to the next leaves alone; else the ratio of the medians."""
    baseline, theirs = gloo_baseline(times, size)
    if baseline != BESIDE:
        return ratio_of_medians(times.get(("fabric", size)), theirs)
    calls = {}
    for row in rows:
        if (row["workers"], row["collective"], row["size_mb"]) == (workers, collective, size) \
                and row["backend"] in ("fabric", BESIDE) and fidelity.faithful(row):
            calls.setdefault(row["repeat"], {})[row["backend"]] = row["seconds"]
    pairs = [pair["fabric"] / pair[BESIDE] for pair in calls.values() if len(pair) == 2]
    return statistics.median(pairs) if pairs else None


def ratio_of_medians(ours, theirs):
    """ours over theirs, None without both (a backend's run failed or was unfaithful)."""
    return ours / theirs if ours and theirs else None


def crossover_mb(rows, workers, collective):
    """The smallest size the fabric carried from which its time is at most Gloo's
    (fabric_ratio) at every larger size it carried too; None if it never is, or a size
    lacks a faithful time. A size the fabric's group left to Gloo is no crossover."""
    times = medians(rows, workers, collective)
    sizes = sorted({row["size_mb"] for row in rows if row["backend"] == "fabric"
                    and row["through_fabric"] and row["workers"] == workers
                    and row["collective"] == collective})
    crossover = None
    for size in reversed(sizes):
        ratio = fabric_ratio(rows, workers, collective, size, times)
        if ratio is None or ratio > 1:
            break
        crossover = size
    return crossover


def summary(rows):
    lines = ["%-15s %3s %8s %10s %10s %7s %8s" % ("collective", "n", "size_mb", "fabric_s",
                                                  "gloo_s", "ratio", "through")]
    for workers in dict.fromkeys(r["workers"] for r in rows):
        lines.append(first_calls(rows, workers))
        for collective in COLLECTIVES:
            measured = sorted({r["size_mb"] for r in rows if r["workers"] == workers
                               and r["collective"] == collective})
            if not measured:
                continue
            times = medians(rows, workers, collective)
            for size in measured:
                ours = times.get(("fabric", size))
                baseline, theirs = gloo_baseline(times, size)
                through = any(r["through_fabric"] for r in rows if r["backend"] == "fabric"
                              and r["size_mb"] == size and r["collective"] == collective
                              and r["workers"] == workers)
                ours_cell = time_cell(rows, workers, collective, size, "fabric", ours)
                theirs_cell = time_cell(rows, workers, collective, size, baseline, theirs)
                ratio = fabric_ratio(rows, workers, collective, size, times)
                lines.append("%-15s %3d %8.3f %10s %10s %7s %8s" % (
                    collective, workers, size, ours_cell, theirs_cell,
                    "%.2fx" % ratio if ratio is not None else "-",
                    "fabric" if through else "-" if ours_cell == "none" else "gloo"))
                if baseline == BESIDE:
                    lines.append(own_run_line(times, size))
            crossover = crossover_mb(rows, workers, collective)
            lines.append("  %s x%d: %s" % (
                collective, workers, "the fabric is no slower from %g MB" % crossover
                if crossover is not None else "no crossover: the fabric is slower at the "
                "largest size measured, or no faithful time there says"))
    lines += [line for line in [fidelity.unfaithful_note(rows)] if line]
    return "\n".join(lines)


def own_run_line(times, size):
    """The summary's note under a size set against BESIDE: that Gloo time is the fabric's
    ranks' own Gloo group's, the ratio its pairs', and what Gloo's run alone measured,
    minutes apart (the ratio of the medians)."""
    alone = times.get(("gloo", size))
    ratio = ratio_of_medians(times.get(("fabric", size)), alone)
    return "  (gloo_s: %s, call by call beside the fabric's group, ratio the median " \
        "pair's; Gloo's run alone: %s)" % (
            BESIDE, "%.3f s, %.2fx" % (alone, ratio) if ratio is not None else "none")


def time_cell(rows, workers, collective, size, backend, seconds):
    """A backend's median time as the summary gives it: "unfaithful" where its calls of
    that size ran but none faithfully, "none" where none ran (its run failed first)."""
    if seconds:
        return "%.3f" % seconds
    ran = any(r["backend"] == backend and r["workers"] == workers and r["size_mb"] == size
              and r["collective"] == collective for r in rows)
    return "unfaithful" if ran else "none"


def first_calls(rows, workers):
    """The summary's line of each backend's first call among `workers`."""
    said = {}
    for row in rows:
        if row["workers"] == workers and row["first_call_s"] is not None:
            said[row["backend"]] = "%s %.3f s" % (row["backend"], row["first_call_s"])
            if row.get("gloo_only"):
                said[row["backend"]] += " (went to Gloo: %s)" % row["gloo_only"]
    return "first calls x%d (the fabric's group makes its jobs in them): %s" % (
        workers, ", ".join(said[b] for b in BACKENDS if b in said) or "none measured")


def main(argv=None):
    args = parse_args(argv)
    finish_emulated_run(args, run, COLUMNS, plot_collectives, summary,
                        "groups, meters, multicast or steering flows",
                        "some call's result was not exact on every rank")


if __name__ == "__main__":
    main()
