"""Benchmark: the host software's own ceiling, which a real fabric meets before ours. Each
role of a job runs alone on one core, on loopback with no shaping, fed by a generator
on the other core, with 1472- and 8972-byte datagrams, on each data path (the native
one with GSO/GRO off and on); iperf 2 sends UDP datagrams of the same size beside it in
the same run, the kernel's reference.

    python -m experiments.host_bench --out results/host_bench.csv

Roles (syncfabric/hosts): sender, a worker's fragments built and paced out
(Round.packets, send_streams); receiver, a worker's round taking its sums back
(ReturnedSums); aggregator and shard, the summing nodes (job_roles), the shard also
returning each sum by multicast. The generator is the native data path's sender, so
that it is not the limit: each row also gives its rate alone, feeding nobody. A row
gives the role's datagrams per second and the CPU microseconds it spent on each, and the
machine (kernel, cpu_model, mitigations: machine_facts). It runs in a network namespace
of its own (root), where loopback carries multicast. Run it with nothing else on the
machine.
"""

import argparse
import json
import multiprocessing
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from experiments.plots.hosts import plot_host_bench
from experiments import machine_facts
from experiments.cli import experiment_parser, write_csv
from syncfabric.hosts.datapath import datapath
from syncfabric.hosts.packets.gradient_wire import HEADER
from syncfabric.hosts.jobs.job_layout import JobLayout
from syncfabric.hosts.jobs.job_roles import AggregatorNode, ShardNode
from syncfabric.hosts.transport.pacing import send_streams
from syncfabric.hosts.transport.receivers import receiving_socket
from syncfabric.hosts.jobs.worker_rounds import ReturnedSums, Round

COLUMNS = ["role", "datapath", "gso", "datagram_bytes", "datagrams_per_s", "gbit_s",
           "cpu_us_per_datagram", "generator_datagrams_per_s", "iperf_datagrams_per_s",
           *machine_facts.COLUMNS]
ROLES = ("sender", "receiver", "aggregator", "shard")
PATHS = (("python", "off"), ("native", "off"), ("native", "on"))
SIZES = (1472, 8972)
NAMESPACE = "sfbench-host"
ADDRESS = {"w1": "127.0.0.11", "w2": "127.0.0.12", "agg": "127.0.0.21", "ps": "127.0.0.31",
           "sink": "127.0.0.41"}
GROUP, PORT, FRAGMENTS = "239.9.9.9", 29500, 256
ROLE_CPU, LOAD_CPU = 0, 1


def job(datagram_bytes, aggregated, senders=("w1", "w2")):
    """A two-worker job of FRAGMENTS fragments: the `senders` send theirs to ps, or
    through agg (a worker that sends nothing has its sums measured coming back)."""
    per = (datagram_bytes - HEADER.size) // 4
    via = "agg" if aggregated else "ps"
    legs = [{"shard": 0, "host": via, "address": ADDRESS[via], "port": PORT,
             "fragments": [0, FRAGMENTS], "rate_mbps": 1e6}]
    return {"id": 1, "generation": 1, "workers": ["w1", "w2"], "model_bytes": per * 4 * FRAGMENTS,
            "fragment_bytes": per * 4, "fragments": FRAGMENTS, "addresses": ADDRESS,
            "shards": [{"host": "ps", "address": ADDRESS["ps"], "port": PORT,
                        "fragments": [0, FRAGMENTS], "bytes": [0, per * 4 * FRAGMENTS],
                        "return": {"port": PORT, "rate_mbps": 1e6, "trees": [
                            {"tree": 1, "group": GROUP, "receivers": ["w1", "w2"]}]}}],
            "destinations": {w: legs if w in senders else [] for w in ("w1", "w2")},
            "aggregators": [{"host": "agg", "address": ADDRESS["agg"], "shard": 0, "port": PORT,
                             "rate_mbps": 1e6, "workers": {"w1": [0, FRAGMENTS], "w2": [0, FRAGMENTS]}}]
            if aggregated else []}


class CountingPath:
    """A data path that counts the datagrams it takes (receive) and sends."""

    def __init__(self, path):
        self.path, self.taken, self.sent = path, 0, 0

    def receive(self, sock):
        batch = self.path.receive(sock)
        self.taken += batch.count
        return batch

    def send(self, *arguments):
        sent = self.path.send(*arguments)
        self.sent += sent
        return sent

    def __getattr__(self, name):
        return getattr(self.path, name)


class Passes:
    """A worker's whole passes of fragments (carrying `mask`), built by `path` as a
    worker builds them: in the buffer of its last pass."""

    def __init__(self, layout, mask, path):
        self.layout, self.mask, self.path = layout, mask, path
        self.values = np.ones(layout.floats, dtype=np.float32)
        self.result = np.zeros(layout.count * layout.per_fragment, dtype=np.float32)
        self.buffer = None

    def build(self, number):
        current = Round(number, self.layout, self.result)
        everything = np.arange(self.layout.count)
        current.contribute(0, self.values, None, everything)
        packets = current.packets(everything, self.mask, self.path, self.buffer)[1]
        self.buffer = getattr(packets, "buffer", None)
        return packets


def send_rounds(streams, seconds, path, counting=None, cycle=None):
    """Round after round, the streams' ((layout, mask, source, destination)) passes built
    and sent at full rate, for `seconds` (round numbers 1..cycle again and again, if
    given); datagrams per second."""
    socks, passes = [], []
    for layout, mask, source, _destination in streams:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((source, 0))
        sock.setblocking(False)
        socks.append(sock)
        passes.append(Passes(layout, mask, path))
    deadline, number, sent, started = time.perf_counter() + seconds, 0, 0, time.perf_counter()
    while time.perf_counter() < deadline:
        number += 1
        for sock, made, (_layout, _mask, _source, destination) in zip(socks, passes, streams):
            packets = made.build((number - 1) % cycle + 1 if cycle else number)
            send_streams(sock, [(destination, packets, 1e6)], path=counting or path)
            sent += len(packets)
    for sock in socks:
        sock.close()
    return sent / (time.perf_counter() - started)


def generate(streams, seconds, gso, rates, cycle=None):
    """The generator, on the other core: the native path's sender (rates: its rate)."""
    os.sched_setaffinity(0, {LOAD_CPU})
    os.environ["SYNCFABRIC_GSO"] = gso
    rates.put(send_rounds(streams, seconds, datapath("native"), cycle=cycle))


def with_generator(streams, seconds, gso, measure, cycle=None):
    """measure() on this core while the generator floods."""
    rates = multiprocessing.Queue()
    generator = multiprocessing.Process(target=generate,
                                        args=(streams, seconds + 1.5, gso, rates, cycle))
    generator.start()
    time.sleep(0.5)
    try:
        return measure()
    finally:
        generator.join()


def sink(address=ADDRESS["sink"]):
    """A socket nobody reads (its datagrams dropped once its buffer is full), for what
    is sent to feed nobody: a port without one costs the kernel an ICMP error each."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((address, PORT))
    return sock


def generator_alone(streams, seconds, gso):
    """The generator's datagrams per second feeding nobody (sent to the sink)."""
    rates = multiprocessing.Queue()
    unread = [(layout, mask, source, (ADDRESS["sink"], PORT)) for layout, mask, source, _d in streams]
    with sink():
        generator = multiprocessing.Process(target=generate, args=(unread, seconds, gso, rates))
        generator.start()
        generator.join()
    return rates.get()


def taken(take, counting, seconds, flush=lambda: None):
    """(datagrams per second take() handled, CPU microseconds each)."""
    cpu, started = time.process_time(), time.perf_counter()
    while time.perf_counter() - started < seconds:
        take()
        flush()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    return counting.taken / elapsed, cpu / max(1, counting.taken) * 1e6


def role_streams(role, datagram_bytes):
    """(the role's layout, the generator's streams feeding it)."""
    if role == "receiver":
        layout = JobLayout(job(datagram_bytes, False, senders=("w2",)))
        return layout, [(layout, layout.everyone, ADDRESS["ps"], (GROUP, PORT))]
    here = ADDRESS["agg" if role == "aggregator" else "ps"]
    layout = JobLayout(job(datagram_bytes, role == "aggregator"))
    return layout, [(layout, bit, ADDRESS[w], (here, PORT)) for w, bit in (("w1", 1), ("w2", 2))]


def measure(role, datagram_bytes, path, seconds):
    """(datagrams/s, CPU us each, the generator's datagrams/s alone) of `role` on path."""
    os.sched_setaffinity(0, {ROLE_CPU})
    counting = CountingPath(path)
    layout, streams = role_streams(role, datagram_bytes)
    gso = "on" if path.gso else "off"
    if role == "sender":
        cpu = time.process_time()
        with sink():
            rate = send_rounds([(layout, 2, ADDRESS["w2"], (ADDRESS["sink"], PORT))], seconds,
                               path, counting)
        return rate, (time.process_time() - cpu) / max(1, counting.sent) * 1e6, None
    alone = generator_alone(streams, seconds, gso)
    cycle = None
    if role == "receiver":   # the sums of rounds 1..KEEP again and again, reopened when done
        sock = receiving_socket(GROUP, PORT, [GROUP], ADDRESS["w1"])
        node = ReturnedSums(layout, layout.shards[0], sock, OpenRounds(layout), counting)
        flush, cycle = node.rounds.reopen, OpenRounds.KEEP
    else:   # the aggregator's sums go on to the shard's host, here a sink
        sock = receiving_socket(streams[0][3][0], PORT, reuse=False)
        node = (AggregatorNode(layout, layout.aggregations[0], sock, counting) if role == "aggregator"
                else ShardNode(layout, layout.shards[0], sock, path=counting))
        flush = node.sums_out.send_due
    onward = sink(ADDRESS["ps"]) if role == "aggregator" else None
    try:
        return (*with_generator(streams, seconds, gso,
                                lambda: taken(node.take, counting, seconds, flush), cycle), alone)
    finally:
        sock.close()
        if onward is not None:
            onward.close()


class OpenRounds(dict):
    """Rounds 1..KEEP open, as a worker holds its rounds in flight; one whose sums all
    came back is opened anew (the generator sends those rounds again and again)."""
    KEEP = 8

    def __init__(self, layout):
        super().__init__()
        self.layout = layout
        self.reopen()

    def reopen(self):
        for number in range(1, self.KEEP + 1):
            if number not in self or self[number].have.all():
                self[number] = Round(number, self.layout)


def iperf_rate(datagram_bytes, seconds):
    """iperf 2's received datagrams per second, server and client on separate cores."""
    server = subprocess.Popen(["taskset", "-c", str(ROLE_CPU), "iperf", "-s", "-u", "-l",
                               str(datagram_bytes), "-p", "5299"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    time.sleep(0.5)
    subprocess.run(["taskset", "-c", str(LOAD_CPU), "iperf", "-c", "127.0.0.1", "-u", "-l",
                    str(datagram_bytes), "-b", "100G", "-t", str(seconds), "-p", "5299"],
                   capture_output=True, check=True)
    time.sleep(0.5)
    server.terminate()
    output = server.communicate()[0]
    lost, total = map(int, re.findall(r"(\d+)/\s*(\d+)\s+\(", output)[-1])
    return (total - lost) / seconds


def inside(args):
    """The measurements, in the benchmark's namespace."""
    for command in ("ip link set lo up multicast on", "ip route add 224.0.0.0/4 dev lo"):
        subprocess.run(command.split(), check=True)
    rows = []
    for size in tqdm(SIZES, desc="datagram sizes"):
        reference = iperf_rate(size, args.seconds)
        for name, gso in PATHS:
            os.environ["SYNCFABRIC_GSO"] = gso
            for role in ROLES:
                rate, cpu_us, alone = measure(role, size, datapath(name), args.seconds)
                rows.append({"role": role, "datapath": name, "gso": gso, "datagram_bytes": size,
                             "datagrams_per_s": round(rate), "gbit_s": round(rate * size * 8 / 1e9, 3),
                             "cpu_us_per_datagram": round(cpu_us, 2),
                             "generator_datagrams_per_s": "" if alone is None else round(alone),
                             "iperf_datagrams_per_s": round(reference),
                             **machine_facts.csv_columns()})
    return rows


def parse_args(argv):
    parser = experiment_parser("experiments.host_bench", __doc__)
    parser.add_argument("--out", type=Path, default=Path("results/host_bench.csv"))
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.inside:
        print(json.dumps(inside(args)))
        return
    if os.geteuid() != 0:
        sys.exit("error: the benchmark runs in a network namespace of its own: run it as root")
    subprocess.run(["ip", "netns", "add", NAMESPACE], check=True)
    try:
        run = subprocess.run(["ip", "netns", "exec", NAMESPACE, sys.executable, "-m",
                              "experiments.host_bench", "--inside", "--seconds", str(args.seconds)],
                             stdout=subprocess.PIPE, check=True, text=True)
    finally:
        subprocess.run(["ip", "netns", "delete", NAMESPACE])
    rows = json.loads(run.stdout.splitlines()[-1])
    write_csv(rows, args.out, COLUMNS)
    for row in rows:
        print("%-10s %-6s gso %-3s %5d B: %8d datagrams/s (%.2f Gbit/s) %5.2f us each, %.2f of "
              "iperf's %d%s" % (row["role"], row["datapath"], row["gso"], row["datagram_bytes"],
                               row["datagrams_per_s"], row["gbit_s"], row["cpu_us_per_datagram"],
                               row["datagrams_per_s"] / row["iperf_datagrams_per_s"],
                               row["iperf_datagrams_per_s"],
                               "" if row["generator_datagrams_per_s"] == "" else
                               "; generator alone %d" % row["generator_datagrams_per_s"]))
    print("CSV: %s  figure: %s" % (args.out, plot_host_bench(args.out)))


if __name__ == "__main__":
    main()
