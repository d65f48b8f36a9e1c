"""Load balance of concurrent multicast jobs: random vs path-aware trees (multi-tenant).

    python -m experiments.load_balance --jobs 24 --receivers-per-job 4 --job-mbps 2

The same seeded set of jobs (a source host and receivers each) runs once per
mode: the trees are requested one after the other (each sees the previous
reservations), then every source sends UDP at its reserved rate to its tree
at once (iperf 2, datagrams that fill the data plane's MTU), and the per-link
load is read from the controller's port statistics (GET /fabric/links) while
they send. Over the inter-switch links (both directions) it reports the max
utilization and the coefficient of variation of load, measured and as
reserved, and how much better path-aware is than random. Writes a CSV row per
mode and a PNG.
"""

import random
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from tqdm import tqdm

from experiments import fidelity
from experiments.cli import (announce_rate, build_fabric, experiment_parser, fabric_arguments,
                             fabric_host_count, progress_printer, write_csv)
from experiments.plots.multicast import plot_load_balance
from experiments.controller_process import wait_until
from experiments.testbed import FabricTestbed
from experiments.workloads import make_jobs, spread
from mininet_topos.platform_net import PlatformError
from mininet_topos.registry import fabric_hosts
from syncfabric.hosts.transport.controller_client import ControllerHttpError
from syncfabric.hosts.packets.wire import chunk_payload_bytes

MODES = ("random", "path-aware")
COLUMNS = ["mode", "jobs", "admitted", "job_mbps", "max_link_util", "cov", "max_reserved_util",
           "reserved_cov", "link_mbps"] + fidelity.COLUMNS
WARM_UP_S = 2.0
JOB_SHARE = 0.1   # a job's reserved rate, of the link rate


def run_mode(bed, jobs, mode, job_mbps, seconds):
    trees = []
    sampler = bed.sampler().start()
    try:
        for source, receivers in jobs:
            try:
                trees.append(bed.client.request("POST", "/multicast/trees", {
                    "source": source, "receivers": receivers, "bandwidth_mbps": job_mbps,
                    "policy": mode}))
            except ControllerHttpError as error:
                if error.status != 409:
                    raise
        senders = [bed.popen(tree["source"], [
            "iperf", "-c", tree["address"], "-u", "-b", "%gM" % job_mbps, "-t", str(seconds),
            "-T", "8", "-l", str(chunk_payload_bytes())],   # datagrams that fill the MTU
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for tree in trees]
        time.sleep(WARM_UP_S)
        samples = defaultdict(list)
        for _ in range(int(seconds - WARM_UP_S - 1)):
            time.sleep(1.0)
            for link in bed.client.get("/fabric/links")["links"]:
                if link["kind"] == "fabric" and link["utilization"] is not None:
                    samples[link["src"], link["dst"]].append(link["utilization"])
        for sender in senders:
            sender.wait()
        usage = sampler.stop()
    finally:
        for tree in trees:
            bed.client.request("DELETE", "/multicast/trees/%d" % tree["id"])
    reserved = defaultdict(float)
    for tree in trees:
        for edge in map(tuple, tree["edges"]):
            reserved[edge] += job_mbps
    fabric_links = [(l["src"], l["dst"], l["capacity_mbps"]) for l in bed.client.get("/fabric/links")["links"]
                    if l["kind"] == "fabric"]
    loads = [statistics.fmean(samples[s, d]) if samples[s, d] else 0.0 for s, d, _ in fabric_links]
    measured = spread(loads)
    booked = spread([reserved[s, d] / capacity for s, d, capacity in fabric_links])
    # the emulator kept up if the links carried what the trees reserved (iperf sends at it)
    carried = sum(load * capacity for load, (_s, _d, capacity) in zip(loads, fabric_links))
    return {"mode": mode, "jobs": len(jobs), "admitted": len(trees), "job_mbps": job_mbps,
            "max_link_util": round(measured[0], 4), "cov": round(measured[1], 4),
            "max_reserved_util": round(booked[0], 4), "reserved_cov": round(booked[1], 4),
            **fidelity.verdict(sum(reserved[s, d] for s, d, _ in fabric_links), carried, None, 0,
                               usage)}


def wait_until_idle(bed, threshold=0.02, timeout_s=15):
    """Let the previous mode's traffic leave the statistics window."""
    wait_until(lambda: all((l["utilization"] or 0) < threshold
                           for l in bed.client.get("/fabric/links")["links"]),
               timeout_s, "the fabric to go idle", poll_s=0.5)


def parse_args(argv):
    parser = experiment_parser("experiments.load_balance", __doc__)
    fabric_arguments(parser)
    parser.add_argument("--jobs", type=int, default=24, help="concurrent multicast jobs (trees)")
    parser.add_argument("--receivers-per-job", type=int, default=4)
    parser.add_argument("--job-mbps", type=float, default=None,
                        help="each job's reserved rate (default 0.1 x --bw: 2 at 20)")
    parser.add_argument("--seconds", type=int, default=8, help="sending time per mode")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("results/load_balance.csv"))
    args = parser.parse_args(argv)
    if args.job_mbps is None and args.bw is not None:
        args.job_mbps = round(JOB_SHARE * args.bw, 3)
    hosts = fabric_host_count(args)
    if args.jobs < 1 or not 1 <= args.receivers_per_job < hosts or (args.job_mbps or 1) <= 0:
        parser.error("need --jobs >= 1, 1 <= --receivers-per-job < %d hosts, --job-mbps > 0" % hosts)
    if args.seconds < WARM_UP_S + 2:
        parser.error("--seconds must be at least %d" % (WARM_UP_S + 2))
    return args


def main(argv=None):
    args = parse_args(argv)
    announce_rate(args)
    topo = build_fabric(args)
    jobs = make_jobs(fabric_hosts(topo), args.jobs, args.receivers_per_job, random.Random(args.seed))
    try:
        with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                           progress=progress_printer("load_balance")) as bed:
            rows = []
            for mode in tqdm(MODES, desc="modes", unit="mode"):
                wait_until_idle(bed)
                rows.append(dict(run_mode(bed, jobs, mode, args.job_mbps, args.seconds),
                                 link_mbps=args.bw))
            leftovers = bed.leftovers()
    except (PlatformError, ValueError, RuntimeError, ControllerHttpError) as error:
        sys.exit("error: %s" % error)
    write_csv(rows, args.out, COLUMNS)
    figure = plot_load_balance(args.out)
    for row in rows:
        print(" ".join("%s=%s" % (column, row[column]) for column in COLUMNS))
    random_row, aware_row = rows
    if not all(fidelity.faithful(row) for row in rows):
        print(fidelity.unfaithful_note(rows))
    for column in ("max_link_util", "cov", "max_reserved_util"):
        if random_row[column] and (column == "max_reserved_util"
                                   or all(fidelity.faithful(row) for row in rows)):
            print("path-aware improves %s by %.1f%% over random"
                  % (column, 100 * (1 - aware_row[column] / random_row[column])))
    print("CSV: %s  figure: %s" % (args.out, figure))
    if leftovers:
        sys.exit("error: switches still hold multicast state: %s" % leftovers)
    print("switches hold no groups, meters or multicast flows after the run")


if __name__ == "__main__":
    main()
