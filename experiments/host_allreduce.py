"""Benchmark: a job's round with the network out of the way (the CPU the only limit, as on
hosts with 10-100 Gbit/s NICs), against PyTorch Gloo's all_reduce on the same hosts and
cores, in the same run.

    python -m experiments.host_allreduce --workers 4 --shards 2 --sizes 4,64,256 \\
        --out results/host_allreduce.csv

W workers and P summing nodes (dedicated: hosts of their own, running the aggregator
daemon; colocated: in the workers) in network namespaces joined by veth pairs through a
Linux bridge, or all on loopback (experiments/host_network.py). The job comes from the
controller's planner with links declared at 100 Gbit/s (experiments/host_jobs.py). Every
sum is checked exactly. A row per network, MTU, placement, data path, GSO/GRO, cores and
size: round_s is the median of rounds 2..R (each from the last host's start to the last
host's end), cpu_s every process's CPU in a round (cpu_per_mb_ms: per MiB of the
buffer; cpu_ratio_to_gloo: ours over Gloo's), rcvbuf_errors the kernel's count of
datagrams dropped for a full receive buffer over the whole run. kernel, cpu_model,
mitigations and memory say which machine it was (machine_facts): the kernel's cost per
datagram, and what a page written first costs, differ between machines of one kind.

--runs N measures every row N times, Gloo's and then ours in turn each time, and
keeps the rows of the median run (by the geometric mean of our rows' ratio_to_gloo);
runs_ratio_to_gloo gives each run's ratio, exact and rcvbuf_errors cover every run. On a
VM one run's ratios may differ from the next's by up to 2x (docs/datapath.md, "Why runs
differ"): quote the median of 3 or more.

--mtus 9000,65535 (the default) measures each network with its data plane at each MTU
(veth's links set to it; loopback's takes any), Gloo's rows too, and our fragments fill
it: 9000 is what NICs take, 65535 the bigger units that loopback and veth allow, seven
times the bytes per datagram the kernel handles. GSO sends runs of datagrams only where
two fit in one 64 KB send, so an MTU past 32781 has GSO "off" rows alone.

--cores 1,2 runs each dedicated shard host's daemon on 1 and on 2 cores (its --cores):
shard_cpu_us_per_datagram is what the shard hosts spend on each datagram they take, and
core_shares how their datagrams split over the cores (core_split.py). On 2 CPUs the
workers need them too: this measures the split's cost, not a speed-up. Root; run it
alone.
"""

import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from experiments.plots.hosts import plot_host_allreduce
from experiments import machine_facts
from experiments.cli import comma_list, experiment_parser, write_csv
from experiments.host_jobs import host_names, plan_job
from experiments.host_network import MTU, NETWORKS, HostNetwork
from syncfabric.decisions.model_shards import MIN_MTU
from syncfabric.hosts.packets.gradient_wire import HEADER
from syncfabric.hosts.jobs.job_layout import MAX_FRAGMENT_BYTES

COLUMNS = ["network", "mtu", "placement", "datapath", "gso", "cores", "size_mb", "round_s",
           "algbw_gbit_s", "cpu_s", "cpu_per_mb_ms", "rcvbuf_errors", "ratio_to_gloo",
           "cpu_ratio_to_gloo", "runs_ratio_to_gloo", "exact",
           "shard_cpu_us_per_datagram", "core_shares", *machine_facts.COLUMNS]
PLACEMENTS = ("dedicated", "colocated")
DATAPATHS = ("python", "native")
GLOO_PORT = 29650
BIGGEST_MTU = 65535   # an IPv4 datagram's most (and every host takes MIN_MTU, 576)


class Hosts:
    """The processes of one measurement, each in its host's namespace, driven by lines."""

    def __init__(self, network, environment):
        self.network, self.environment = network, environment
        self.processes = {}   # name -> Popen

    def start(self, name, argv):
        self.processes[name] = subprocess.Popen(
            self.network.command(name, [sys.executable, "-m", "experiments.host_ranks", *argv]),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=self.environment)

    def ask(self, names, line):
        """Send `line` to every host in `names`; their JSON answers."""
        for name in names:
            self.processes[name].stdin.write(line + "\n")
            self.processes[name].stdin.flush()
        return [self.read(name) for name in names]

    def read(self, name):
        line = self.processes[name].stdout.readline()
        if not line:
            raise RuntimeError("host %s ended early (exit %s)" % (name, self.processes[name].wait()))
        return json.loads(line)

    def close(self):
        for process in self.processes.values():
            if process.poll() is None:
                try:
                    process.stdin.write("stop\n")
                    process.stdin.close()
                except OSError:
                    pass
        for process in self.processes.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def measure(network, environment, workers, servers, rounds, start_ranks, steady=None):
    """Start the hosts (start_ranks(hosts)), run `rounds` rounds in step; {round_s: the
    median round of 2..R, cpu_s: CPU seconds per round, rcvbuf_errors, exact: every round
    exact, servers: the shard hosts' ServerCounts over rounds 2..R}. steady(processes):
    a context manager around rounds 2..R, given {host name: Popen} (a profiler's window:
    experiments.host_profile)."""
    hosts = Hosts(network, environment)
    errors_before = network.rcvbuf_errors()
    try:
        start_ranks(hosts)
        for name in workers:
            assert hosts.read(name) == {"ready": True}
        exact = all(a["exact"] for a in hosts.ask(workers, "go"))   # round 1: not timed
        before = ServerCounts.of(hosts.ask(servers, "cpu"))
        times, cpu = [], []
        with (steady or contextlib.nullcontext)(hosts.processes):
            for _number in range(2, rounds + 1):
                answers = hosts.ask(workers, "go")
                exact = exact and all(a["exact"] for a in answers)
                times.append(max(a["end"] for a in answers) - max(a["start"] for a in answers))
                cpu.append(sum(a["cpu_s"] for a in answers))
        used = ServerCounts.of(hosts.ask(servers, "cpu")).since(before)
    finally:
        hosts.close()
    return {"round_s": statistics.median(times),
            "cpu_s": statistics.mean(cpu) + used.cpu_s / max(1, rounds - 1),
            "rcvbuf_errors": network.rcvbuf_errors() - errors_before, "exact": exact,
            "servers": used}


@dataclass
class ServerCounts:
    """The shard hosts' CPU seconds and datagrams taken per core (of each core index,
    summed over the hosts)."""
    cpu_s: float
    datagrams: list

    @classmethod
    def of(cls, answers):
        """From the shard hosts' answers to "cpu"."""
        return cls(sum(a["cpu_s"] for a in answers),
                   [sum(column) for column in zip(*(a["datagrams"] for a in answers))])

    def since(self, before):
        return ServerCounts(self.cpu_s - before.cpu_s,
                            [now - then for now, then in zip(self.datagrams, before.datagrams)])

    def us_per_datagram(self):
        return round(self.cpu_s / sum(self.datagrams) * 1e6, 3) if sum(self.datagrams) else ""

    def shares(self):
        """Each core's part of the datagrams, e.g. "0.51/0.49"; "" without shard hosts."""
        total = sum(self.datagrams)
        return "/".join("%.3f" % (n / total) for n in self.datagrams) if total else ""


def gloo_row(network, args, size_mb, environment, steady=None):
    workers, _ = host_names(args.workers, 0, "colocated")
    floats = int(size_mb * 2 ** 20) // 4
    master = "%s:%d" % (network.addresses[workers[0]], GLOO_PORT)

    def start(hosts):
        for rank, name in enumerate(workers):
            hosts.start(name, ["gloo", "--floats", str(floats), "--rank", str(rank), "--world",
                               str(len(workers)), "--master", master, "--rounds", str(args.rounds)])
    env = dict(environment, GLOO_SOCKET_IFNAME=network.interface)
    result = measure(network, env, workers, [], args.rounds, start, steady)
    return row(network, "-", "gloo", "-", "-", size_mb, result)


def our_row(network, args, size_mb, variant, job_path, environment, steady=None):
    placement, datapath, gso, cores = variant
    workers, servers = host_names(args.workers, args.shards, placement)

    def start(hosts):
        for name in servers:
            hosts.start(name, ["shard", "--job", str(job_path), "--name", name,
                               "--cores", str(cores)])
        for name in workers:
            hosts.start(name, ["worker", "--job", str(job_path), "--name", name,
                               "--rounds", str(args.rounds)])
    env = dict(environment, SYNCFABRIC_DATAPATH=datapath, SYNCFABRIC_GSO=gso)
    return row(network, placement, datapath, gso, cores, size_mb,
               measure(network, env, workers, servers, args.rounds, start, steady))


def row(network, placement, datapath, gso, cores, size_mb, measured):
    round_s = measured["round_s"]
    return {"network": network.kind, "mtu": network.mtu, "placement": placement,
            "datapath": datapath, "gso": gso, "cores": cores, "size_mb": size_mb,
            "round_s": round(round_s, 5),
            "algbw_gbit_s": round(size_mb * 2 ** 20 * 8 / round_s / 1e9, 3),
            "cpu_s": round(measured["cpu_s"], 5),
            "cpu_per_mb_ms": round(measured["cpu_s"] / size_mb * 1000, 3),
            "rcvbuf_errors": measured["rcvbuf_errors"], "exact": measured["exact"],
            "shard_cpu_us_per_datagram": measured["servers"].us_per_datagram(),
            "core_shares": measured["servers"].shares(), **machine_facts.csv_columns()}


def variants(args, mtu):
    """(placement, data path, gso, cores) of our rows on a data plane of `mtu`: GSO/GRO
    only on the native path and where it sends runs (gso_runs), more than one core only
    for dedicated shard hosts (the daemon's)."""
    return [(placement, datapath, gso, cores) for placement in args.placements
            for datapath in args.datapaths
            for gso in (("off", "on") if datapath == "native" and gso_runs(mtu) else ("off",))
            for cores in (args.cores if placement == "dedicated" else [1])]


MTU_RANGE = "from %d to %d bytes, an IPv4 datagram's least and most" % (MIN_MTU, BIGGEST_MTU)


def ipv4_mtu(mtu):
    """Whether an IPv4 data plane may have `mtu` (MTU_RANGE)."""
    return MIN_MTU <= mtu <= BIGGEST_MTU


def gso_runs(mtu):
    """Whether GSO sends datagrams that fill `mtu` in runs: two fit in one UDP send."""
    return 2 * (mtu - 20 - 8) <= MAX_FRAGMENT_BYTES + HEADER.size


def write_job(network, args, size_mb, placement, folder):
    """The planner's job for `placement` on this network, in a file in `folder`."""
    job_path = Path(folder) / ("%s-%d-%s-%g.json" % (network.kind, network.mtu, placement,
                                                    size_mb))
    workers, servers = host_names(args.workers, args.shards, placement)
    job = plan_job({n: network.addresses[n] for n in workers + servers}, workers,
                   int(size_mb * 2 ** 20), placement, args.shards, network.mtu)
    job_path.write_text(json.dumps(job))
    return job_path


def environment_of_hosts():
    """The hosts' processes' environment: one thread for numpy's sums, this checkout first."""
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(Path.cwd()))


def run(args):
    environment = environment_of_hosts()
    rows = []
    steps = len(args.networks) * len(args.sizes) * args.runs \
        * sum(1 + len(variants(args, mtu)) for mtu in args.mtus)
    workers, servers = host_names(args.workers, args.shards, "dedicated")
    with tqdm(total=steps, desc="host all-reduce") as bar, tempfile.TemporaryDirectory() as folder:
        for kind in args.networks:
            for mtu in args.mtus:
                with HostNetwork(kind, workers + servers, mtu) as network:
                    for size_mb in args.sizes:
                        runs = [one_run(network, args, size_mb, environment, folder, bar)
                                for _run in range(args.runs)]
                        rows += median_run(runs)
    return rows


def one_run(network, args, size_mb, environment, folder, bar):
    """Gloo's row, then each of ours, every one with its ratios to Gloo's (Gloo's own: 1)."""
    gloo = gloo_row(network, args, size_mb, environment)
    bar.update()
    ours = []
    for variant in variants(args, network.mtu):
        job_path = write_job(network, args, size_mb, variant[0], folder)
        ours.append(our_row(network, args, size_mb, variant, job_path, environment))
        bar.update()
    for row in [gloo] + ours:
        row["ratio_to_gloo"] = round(gloo["round_s"] / row["round_s"], 3)
        row["cpu_ratio_to_gloo"] = round(row["cpu_s"] / gloo["cpu_s"], 3)
    return [gloo] + ours


def median_run(runs):
    """The rows of the run whose geometric mean of our rows' ratio_to_gloo is the median
    (of an even count, the lower middle one), each with every run's ratio
    (runs_ratio_to_gloo), exact only if every run's was, and all runs' rcvbuf_errors."""
    def speed(rows):
        return statistics.geometric_mean([row["ratio_to_gloo"] for row in rows[1:]])
    chosen = sorted(runs, key=speed)[(len(runs) - 1) // 2]
    for i, row in enumerate(chosen):
        row["runs_ratio_to_gloo"] = "" if i == 0 else \
            "/".join("%.3f" % rows[i]["ratio_to_gloo"] for rows in runs)
        row["exact"] = all(rows[i]["exact"] for rows in runs)
        row["rcvbuf_errors"] = sum(rows[i]["rcvbuf_errors"] for rows in runs)
    return chosen


def parse_args(argv):
    parser = experiment_parser("experiments.host_allreduce", __doc__)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--shards", type=int, default=2, help="summing nodes (default 2)")
    parser.add_argument("--sizes", type=comma_list(float), default=[4.0, 64.0, 256.0],
                        help="buffer sizes in MiB (default 4,64,256)")
    parser.add_argument("--rounds", type=int, default=5, help="per row; the first is not timed")
    parser.add_argument("--runs", type=int, default=1,
                        help="measure every row this many times, Gloo's and ours in turn; "
                             "the rows are the median run's (default 1)")
    parser.add_argument("--networks", type=comma_list(str, NETWORKS), default=list(NETWORKS))
    parser.add_argument("--placements", type=comma_list(str, PLACEMENTS), default=list(PLACEMENTS))
    parser.add_argument("--datapaths", type=comma_list(str, DATAPATHS), default=list(DATAPATHS))
    parser.add_argument("--mtus", type=comma_list(int), default=[MTU, BIGGEST_MTU],
                        help="the data plane's MTUs, each a network of its own, Gloo's rows "
                             "too (default %d,%d)" % (MTU, BIGGEST_MTU))
    parser.add_argument("--cores", type=comma_list(int), default=[1],
                        help="cores of each dedicated shard host's daemon, e.g. 1,2 "
                             "(default 1)")
    parser.add_argument("--out", type=Path, default=Path("results/host_allreduce.csv"))
    args = parser.parse_args(argv)
    if args.rounds < 2 or args.runs < 1 or args.workers < 2 or args.shards < 1 \
            or min(args.sizes) <= 0:
        parser.error("needs --rounds >= 2, --runs >= 1, --workers >= 2, --shards >= 1 and "
                     "positive sizes")
    if not all(map(ipv4_mtu, args.mtus)):
        parser.error("--mtus: " + MTU_RANGE)
    if not all(1 <= cores <= len(os.sched_getaffinity(0)) for cores in args.cores):
        parser.error("--cores: from 1 to %d, the CPUs here" % len(os.sched_getaffinity(0)))
    if "colocated" in args.placements and not 2 <= args.shards <= args.workers:
        parser.error("shards colocated in the workers' hosts are 2 to --workers of them "
                     "(--shards %d): change --shards, or --placements dedicated" % args.shards)
    return args


def summary(r):
    """A row as one line of the benchmark's output."""
    line = "%-8s mtu %-5d %-9s %-6s gso %-3s cores %-2s %6g MB: %8.4f s %7.3f Gbit/s " \
           "cpu %7.4f s  rcvbuf errors %d" % (
               r["network"], r["mtu"], r["placement"], r["datapath"], r["gso"], r["cores"],
               r["size_mb"], r["round_s"], r["algbw_gbit_s"], r["cpu_s"], r["rcvbuf_errors"])
    if r["shard_cpu_us_per_datagram"] != "":
        line += "  shards %.2f us/datagram, cores %s" % (r["shard_cpu_us_per_datagram"],
                                                         r["core_shares"])
    if r["datapath"] != "gloo":
        line += "  %.2fx Gloo's speed, %.2fx its CPU per byte" % (r["ratio_to_gloo"],
                                                                r["cpu_ratio_to_gloo"])
    return line + ("" if r["exact"] else "  NOT EXACT")


def main(argv=None):
    args = parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("error: the hosts run in network namespaces: run it as root")
    rows = run(args)
    write_csv(rows, args.out, COLUMNS)
    for r in rows:
        print(summary(r))
    print("CSV: %s  figure: %s" % (args.out, plot_host_allreduce(args.out)))
    if not all(r["exact"] for r in rows):
        sys.exit("error: a sum was not exact")


if __name__ == "__main__":
    main()
