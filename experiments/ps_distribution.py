"""PS parameter distribution: completion time vs number of workers for unicast,
random multicast and path-aware multicast on a spine-leaf.

    python -m experiments.ps_distribution --workers 3,7,15 --model-mb 5 --rounds 3

h1 is the PS; the workers are the next N hosts. Every round moves the real
model bytes (experiments/traffic/model_transfer.py) and every worker checks their
SHA-256. By default the model is what the link moves in 2 s (S/b = 2 s), so that the
transfer, not a round's fixed costs, decides the ratios at any calibrated rate. The link rate is by default a safe fraction of what `make calibrate`
measured for multicast on this machine (--bw auto). Every row says whether the
emulator kept up (experiments/fidelity.py: achieved vs planned rate, first-pass
loss no counter explains, CPU). Writes one CSV row per round and a PNG, and
prints a table with the median completion time of the faithful rows, its ratio
to the line-rate limit S/b_link, and the speedup over unicast; rows that are
not faithful are counted, never used for a ratio. Afterwards it checks that no
switch holds a group, meter or multicast flow of a released tree.
"""

import statistics

from tqdm import tqdm

from experiments import fidelity
from experiments.cli import (announce_rate, build_fabric, comma_list, csv_out_argument,
                             experiment_parser, fabric_arguments, fabric_host_count,
                             finish_emulated_run, model_mb_argument, model_mb_at, progress_printer)
from experiments.defaults import LINE_RATE_S
from experiments.plots.multicast import plot_ps_distribution
from experiments.testbed import FabricTestbed
from experiments.traffic.model_transfer import run_transfer
from mininet_topos.registry import fabric_hosts
from syncfabric.hosts.patterns.model_transfer import MODES

COLUMNS = ["mode", "workers", "model_mb", "round", "link_mbps", "completion_s", "line_rate_s",
           "tree_setup_s", "bytes_sent", "repair_passes", "verified", "planned_mbps",
           "achieved_mbps", "lowest_rate_mbps"] + fidelity.COLUMNS


def parse_args(argv):
    parser = experiment_parser("experiments.ps_distribution", __doc__)
    fabric_arguments(parser)
    parser.add_argument("--workers", type=comma_list(int), default=[3, 7, 15],
                        help="comma list of worker counts N")
    parser.add_argument("--model-mb", type=model_mb_argument, default="auto",
                        help="model size S, MB, or auto: what the link moves in %g s "
                             "(default %%(default)s)" % LINE_RATE_S)
    parser.add_argument("--modes", type=comma_list(str, MODES), default=list(MODES),
                        help="comma list of %s" % ", ".join(MODES))
    parser.add_argument("--rounds", type=int, default=3, help="rounds per (N, mode)")
    parser.add_argument("--rate-fraction", type=float, default=0.95,
                        help="multicast reservation and sending rate, as a fraction of --bw")
    csv_out_argument(parser, "ps_distribution")
    args = parser.parse_args(argv)
    hosts = fabric_host_count(args)
    if max(args.workers) > hosts - 1 or min(args.workers) < 1:
        parser.error("--workers must be between 1 and %d on this fabric" % (hosts - 1))
    if args.rounds < 1 or not 0 < args.rate_fraction <= 1:
        parser.error("--rounds and --rate-fraction must be positive (fraction <= 1)")
    model_mb_at(args, LINE_RATE_S)
    return args


def run(args):
    announce_rate(args)
    bw = args.bw
    topo = build_fabric(args)
    hosts = fabric_hosts(topo)
    rows, line_rate_s = [], args.model_mb * 8 / bw
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                       progress=progress_printer("ps_distribution")) as bed:
        runs = [(n, mode) for n in args.workers for mode in args.modes]
        for workers, mode in tqdm(runs, desc="runs", unit="run"):
            sampler = bed.sampler().start()
            results = run_transfer(bed, hosts[0], hosts[1:workers + 1], mode, args.model_mb,
                                   args.rate_fraction * bw, args.rounds)
            usage = sampler.stop()
            for result in results:
                row = {**{key: result.get(key) for key in COLUMNS}, "line_rate_s": line_rate_s,
                       "link_mbps": bw}
                rows.append(dict(row, **row_fidelity(result, workers, bw, usage)))
        leftovers = bed.leftovers()
    return rows, leftovers


def row_fidelity(result, workers, bw, usage):
    """Unicast (TCP) is held to the link rate of the PS's link; multicast to its planned
    sending rate and to its first-pass loss."""
    if result["mode"] == "unicast":
        achieved = result["bytes_sent"] * 8 / 1e6 / result["completion_s"]
        return dict(fidelity.verdict(bw, achieved, None, 0, usage), planned_mbps=bw,
                    achieved_mbps=round(achieved, 3))
    return dict(fidelity.verdict(result["planned_mbps"], result["achieved_mbps"],
                                 result["first_pass_loss"], result["lost_chunks"], usage),
                achieved_mbps=round(result["achieved_mbps"], 3))


def summary(rows):
    """Median completion of the faithful rows per (workers, mode), with ratios to line
    rate and to unicast; a case with no faithful row gets no ratio."""
    cases = {}
    for row in rows:
        cases.setdefault((row["workers"], row["mode"]), []).append(row)
    medians = {key: statistics.median(r["completion_s"] for r in case if fidelity.faithful(r))
               for key, case in cases.items() if any(fidelity.faithful(r) for r in case)}
    lines = ["%8s %-11s %12s %10s %18s %9s %9s" % ("workers", "mode", "completion_s", "vs_S/b",
                                                   "speedup_vs_unicast", "verified", "faithful")]
    for (workers, mode), case in sorted(cases.items()):
        median, unicast = medians.get((workers, mode)), medians.get((workers, "unicast"))
        faithful = sum(fidelity.faithful(r) for r in case)
        lines.append("%8d %-11s %12s %10s %18s %9s %9s" % (
            workers, mode, "%.2f" % median if median else "-",
            "%.2f" % (median / case[0]["line_rate_s"]) if median else "-",
            "%.1f" % (unicast / median) if unicast and median else "-",
            all(r["verified"] for r in case), "%d/%d" % (faithful, len(case))))
    reasons = sorted({r["fidelity_reason"] for r in rows if not fidelity.faithful(r)})
    if reasons:
        lines.append("not faithful (no ratio uses them): " + " | ".join(reasons))
    lines.append("link rate %g Mbit/s; seconds are this machine's, ratios are the claim"
                 % rows[0]["link_mbps"])
    return "\n".join(lines)


def main(argv=None):
    finish_emulated_run(parse_args(argv), run, COLUMNS, plot_ps_distribution, summary,
                        "groups, meters or multicast flows", "some worker's SHA-256 did not match")


if __name__ == "__main__":
    main()
