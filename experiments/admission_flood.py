"""A job's rounds beside a flood from a host outside it, against the same rounds without
one, in one run: the switches' admission (docs/deploy.md, "Only a job's members reach
it") must keep the flood from costing the job anything.

    python -m experiments.admission_flood --rounds 20 --flood-pps 1000 \\
        --out results/admission_flood.csv

A 2x2 spine-leaf (the usual flags) with an aggregator host on each spine. The job's
workers are every host but the last, its shards in the workers (colocated) and its
gradients aggregated in the spines' daemons. The last host is outside the job: in the
`flood` mode it sends 1472-byte datagrams at --flood-pps, with the first worker's
address and fragment headers of the job's, to the job's aggregators and shards, for the
whole of the rounds (experiments/traffic/spoof.py). The `clean` rounds run first, then
the `flood` rounds, each mode a job of its own from the same request. Each row is one round, with the emulator's fidelity
verdict; the summary gives the median round time of each mode and their ratio (target:
at most 1.1), and how many datagrams the switches dropped at admission.
"""

import re
import subprocess
import sys
import time

from tqdm import tqdm

from experiments import fidelity
from experiments.cli import (announce_rate, build_fabric, csv_out_argument, experiment_parser,
                             fabric_arguments, fabric_host_count, finish_emulated_run)
from experiments.defaults import AGGREGATOR_SHARE, JOB_START_S, ROUNDS_APART
from experiments.plots.robustness import plot_admission_flood
from experiments.testbed import FabricTestbed
from experiments.traffic.jobs import job_round_fidelity, job_rounds, run_job, served_job
from mininet_topos.registry import fabric_hosts
from syncfabric.hosts.packets.wire import data_mtu

MODES = ("clean", "flood")
COLUMNS = ["mode", "round", "comm_s", "verified", "flood_pps", "flood_sent", "admission_drops",
           "predicted_s", "link_mbps"] + fidelity.COLUMNS
TARGET_RATIO = 1.1


def parse_args(argv):
    parser = experiment_parser("experiments.admission_flood", __doc__)
    fabric_arguments(parser, spines=2, leaves=2, hosts_per_leaf=2, pattern="all-to-all")
    parser.add_argument("--rounds", type=int, default=20, help="rounds per mode")
    parser.add_argument("--model-bytes", type=int, default=1_000_000,
                        help="the job's model, bytes of float32 (default %(default)s)")
    parser.add_argument("--flood-pps", type=float, default=1000.0,
                        help="the flood's datagrams per second (default %(default)s: 11.8 "
                             "Mbit/s of 1472-byte datagrams)")
    csv_out_argument(parser, "admission_flood")
    args = parser.parse_args(argv)
    if fabric_host_count(args) < 3:
        parser.error("the fabric needs at least 3 hosts: 2 workers and one outside the job")
    if args.rounds < 1 or args.flood_pps <= 0 or args.model_bytes < 4 or args.model_bytes % 4:
        parser.error("--rounds and --flood-pps must be positive, --model-bytes a positive "
                     "multiple of 4")
    return args


def run(args):
    announce_rate(args)
    topo = build_fabric(args, aggregators="top", aggregator_bw=AGGREGATOR_SHARE * args.bw)
    hosts = fabric_hosts(topo)
    workers, outsider = hosts[:-1], hosts[-1]
    request = {"workers": workers, "model_bytes": args.model_bytes, "placement": "colocated",
               "mtu": data_mtu()}
    rows = []
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port) as bed, \
            tqdm(total=2 * args.rounds, desc="rounds", unit="round") as bar:
        for mode in MODES:   # a job of its own each: a job's rounds are numbered once
            with served_job(bed, request, args.bw) as job:
                rows += mode_rounds(bed, job, mode, outsider, args)
            bar.update(args.rounds)
        leftovers = bed.leftovers()
    return rows, leftovers


def mode_rounds(bed, job, mode, outsider, args):
    """The job's rounds in `mode`, with the flood from `outsider` throughout if it is `flood`."""
    flood = None if mode == "clean" else start_flood(bed, job, outsider, args.flood_pps)
    drops_before = admission_drops(bed)
    sampling = bed.sampler().start()
    try:
        results = job_rounds(run_job(bed, job, args.rounds, start_in_s=JOB_START_S,
                                     every_s=ROUNDS_APART * job["predicted_round_s"]))
    finally:
        usage = sampling.stop()
        sent = stop_flood(flood)
    time.sleep(2.5)   # the controller reads the switches' drop counts every 2 s
    dropped = admission_drops(bed) - drops_before
    return [dict(job_round_fidelity(r, usage.during(r["started_at"], r["ended_at"])), mode=mode,
                 round=r["round"], comm_s=r["comm_s"], verified=r["exact"],
                 flood_pps=args.flood_pps if flood else 0, flood_sent=sent,
                 admission_drops=dropped, predicted_s=job["predicted_round_s"],
                 link_mbps=args.bw) for r in results]


def start_flood(bed, job, outsider, pps):
    """The spoofing program in `outsider`, at the job's aggregators and shards."""
    targets = ["%s:%d" % (part["address"], part["port"])
               for part in job["aggregators"] + job["shards"]]
    return bed.popen(outsider, [sys.executable, "-m", "experiments.traffic.spoof", "--source",
                                job["addresses"][job["workers"][0]], "--job", str(job["id"]),
                                "--fragments", str(job["fragments"]), "--pps", str(pps),
                                *targets], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True)


def stop_flood(flood):
    """Stop the flood; how many datagrams it sent (0 without one)."""
    if flood is None:
        return 0
    flood.terminate()
    output, errors = flood.communicate(timeout=10)
    if flood.returncode != 0 or not output.strip().isdigit():
        raise RuntimeError("the flood failed: %s" % (errors or output)[-400:])
    return int(output)


def admission_drops(bed):
    """Datagrams every switch dropped at admission so far, as the controller counts them."""
    import urllib.request
    with urllib.request.urlopen(bed.client.base_url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(float(value) for value in
               re.findall(r"^syncfabric_admission_drops_total\{[^}]*\} (\S+)$", text, re.M))


def summary(rows):
    medians = {mode: fidelity.faithful_median([r for r in rows if r["mode"] == mode], "comm_s")
               for mode in MODES}
    flooded = [r for r in rows if r["mode"] == "flood"]
    lines = ["median round time at %g Mbit/s: clean %s, beside the flood %s"
             % (rows[0]["link_mbps"], *("%.3f s" % m if m else "n/a (no faithful round)"
                                        for m in (medians["clean"], medians["flood"])))]
    if medians["clean"] and medians["flood"]:
        ratio = medians["flood"] / medians["clean"]
        lines.append("flood / clean: %.3fx (target at most %.1fx): %s" % (
            ratio, TARGET_RATIO, "met" if ratio <= TARGET_RATIO else "NOT met"))
    lines.append("the flood sent %d datagrams at %g per second; the switches dropped %d at "
                 "admission" % (flooded[0]["flood_sent"], flooded[0]["flood_pps"],
                                flooded[0]["admission_drops"]))
    lines += [line for line in [fidelity.unfaithful_note(rows)] if line]
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    finish_emulated_run(args, run, COLUMNS, plot_admission_flood, summary, "tree or plan state",
                        "a round's sums were not exact")


if __name__ == "__main__":
    main()
