"""Benchmark: the host software's own ceiling, which a real fabric meets before ours. Each
role of a job runs alone on one core, on loopback with no shaping, fed by a generator
on the other core, with 1472- and 8972-byte datagrams; iperf 2 sends UDP datagrams of
the same size beside it in the same run, the kernel's reference.

    python -m experiments.host_bench --out results/host_bench.csv

Roles (syncfabric/hosts): sender, a worker's fragments built and paced out
(fragment_packet, send_streams); receiver, a worker's round taking its sums back
(FabricWorker); aggregator and shard, the summing nodes (job_roles), the shard also
returning each sum by multicast. It runs in a network namespace of its own (root), where
loopback carries multicast. Run it with nothing else on the machine.
"""

import argparse
import json
import multiprocessing
import os
import re
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from experiments import plots
from experiments.cli import ArgumentParser, write_csv
from syncfabric.hosts.worker_rounds import ReturnedSums, Round
from syncfabric.hosts.gradient_wire import HEADER, fragment_packet
from syncfabric.hosts.job_layout import JobLayout
from syncfabric.hosts.job_roles import AggregatorNode, ShardNode
from syncfabric.hosts.pacing import send_streams
from syncfabric.hosts.receivers import receiving_socket

COLUMNS = ["role", "datagram_bytes", "datagrams_per_s", "gbit_s", "iperf_datagrams_per_s"]
ROLES = ("sender", "receiver", "aggregator", "shard")
SIZES = (1472, 8972)
NAMESPACE = "sfbench-host"
ADDRESS = {"w1": "127.0.0.11", "w2": "127.0.0.12", "agg": "127.0.0.21", "ps": "127.0.0.31"}
GROUP, PORT, FRAGMENTS = "239.9.9.9", 29500, 256
ROLE_CPU, LOAD_CPU = 0, 1
ROUND_FIELD = struct.Struct("!I")   # a fragment header's round number, at offset 4


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
                        "return": {"tree": 1, "group": GROUP, "port": PORT, "rate_mbps": 1e6}}],
            "destinations": {w: legs if w in senders else [] for w in ("w1", "w2")},
            "aggregators": [{"host": "agg", "address": ADDRESS["agg"], "shard": 0, "port": PORT,
                             "rate_mbps": 1e6, "workers": {"w1": [0, FRAGMENTS], "w2": [0, FRAGMENTS]}}]
            if aggregated else []}


def flood(streams, seconds):
    """The generator, on the other core: round after round, fragment i of every stream
    ((templates, source, destination): fragment datagrams, their round number written
    in place, sent from `source`) before fragment i + 1, for `seconds`."""
    os.sched_setaffinity(0, {LOAD_CPU})
    senders = []
    for templates, source, destination in streams:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind((source, 0))
        senders.append((sock, [bytearray(t) for t in templates], destination))
    deadline, number = time.monotonic() + seconds, 0
    while time.monotonic() < deadline:
        number += 1
        for index in range(FRAGMENTS):
            for sock, packets, destination in senders:
                ROUND_FIELD.pack_into(packets[index], 4, number)
                try:
                    sock.sendto(packets[index], destination)
                except OSError:
                    pass


def with_generator(streams, seconds, measure):
    """measure() on this core while the streams flood."""
    generator = multiprocessing.Process(target=flood, args=(streams, seconds + 2))
    generator.start()
    time.sleep(0.5)
    try:
        return measure()
    finally:
        generator.terminate()
        generator.join()


def sender(datagram_bytes, seconds):
    layout = JobLayout(job(datagram_bytes, False))
    values = np.ones(layout.floats, dtype=np.float32)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((ADDRESS["w2"], 0))
    sent, started, number = 0, time.perf_counter(), 0
    while time.perf_counter() - started < seconds:
        number += 1
        packets = [fragment_packet(1, number, i, 2, values, layout.per_fragment)
                   for i in range(FRAGMENTS)]
        send_streams(sock, [((ADDRESS["ps"], PORT), packets, 1e6)])
        sent += len(packets)
    return sent / (time.perf_counter() - started)


def taken_per_second(take, sock, seconds, flush=lambda: None):
    """How many datagrams take() handled per second, as the counting socket it reads saw."""
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        take()
        flush()
    return sock.counted / (time.perf_counter() - started)


class CountingSocket:
    """A socket whose recvfrom counts what it returns (the roles read through it)."""

    def __init__(self, sock):
        self.sock, self.counted = sock, 0

    def recvfrom(self, size):
        answer = self.sock.recvfrom(size)
        self.counted += 1
        return answer

    def __getattr__(self, name):
        return getattr(self.sock, name)


def summing(role, datagram_bytes, seconds):
    """Fragments an aggregator or a shard's host takes per second from two workers,
    every round fresh (the shard also returns each sum by multicast)."""
    aggregated = role == "aggregator"
    layout = JobLayout(job(datagram_bytes, aggregated))
    here = ADDRESS["agg" if aggregated else "ps"]
    sock = CountingSocket(receiving_socket(here, PORT, reuse=False))
    node = (AggregatorNode(layout, layout.aggregations[0], sock) if aggregated
            else ShardNode(layout, layout.shards[0], sock))
    values = np.ones(layout.floats, dtype=np.float32)
    streams = [([fragment_packet(1, 0, i, bit, values, layout.per_fragment)
                 for i in range(FRAGMENTS)], ADDRESS[w], (here, PORT))
               for w, bit in (("w1", 1), ("w2", 2))]
    try:
        return with_generator(streams, seconds,
                              lambda: taken_per_second(node.take, sock, seconds, node.sums_out.send_due))
    finally:
        sock.close()


class OpenRounds:
    """Every round open, as a worker would hold it (the newest KEEP of them)."""
    KEEP = 8

    def __init__(self, layout):
        self.layout, self.rounds = layout, {}

    def get(self, number):
        if number not in self.rounds:
            self.rounds[number] = Round(number, self.layout)
            for old in sorted(self.rounds)[:-self.KEEP]:
                del self.rounds[old]
        return self.rounds[number]


def receiver(datagram_bytes, seconds):
    """Sums a worker takes back per second from its shard's tree (ReturnedSums, as
    FabricWorker reads them), every round fresh."""
    layout = JobLayout(job(datagram_bytes, False, senders=("w2",)))
    shard = layout.shards[0]
    sock = CountingSocket(receiving_socket(GROUP, PORT, [GROUP], ADDRESS["w1"]))
    returned = ReturnedSums(layout, shard, sock, OpenRounds(layout))
    values = np.ones(layout.floats, dtype=np.float32)
    templates = [fragment_packet(1, 0, i, layout.everyone, values, layout.per_fragment)
                 for i in range(FRAGMENTS)]
    try:
        return with_generator([(templates, ADDRESS["ps"], (GROUP, PORT))], seconds,
                              lambda: taken_per_second(returned.take, sock, seconds))
    finally:
        sock.close()


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


def measure(role, datagram_bytes, seconds):
    os.sched_setaffinity(0, {ROLE_CPU})
    if role == "sender":
        return sender(datagram_bytes, seconds)
    if role == "receiver":
        return receiver(datagram_bytes, seconds)
    return summing(role, datagram_bytes, seconds)


def inside(args):
    """The measurements, in the benchmark's namespace."""
    for command in ("ip link set lo up multicast on", "ip route add 224.0.0.0/4 dev lo"):
        subprocess.run(command.split(), check=True)
    rows = []
    for size in tqdm(SIZES, desc="datagram sizes"):
        reference = iperf_rate(size, args.seconds)
        for role in ROLES:
            rate = measure(role, size, args.seconds)
            rows.append({"role": role, "datagram_bytes": size, "datagrams_per_s": round(rate),
                         "gbit_s": round(rate * size * 8 / 1e9, 3),
                         "iperf_datagrams_per_s": round(reference)})
    return rows


def parse_args(argv):
    parser = ArgumentParser(prog="python -m experiments.host_bench",
                            description=__doc__.split("\n\n")[0])
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
        print("%-10s %5d B: %8d datagrams/s (%.2f Gbit/s), %.2f of iperf's %d"
              % (row["role"], row["datagram_bytes"], row["datagrams_per_s"], row["gbit_s"],
                 row["datagrams_per_s"] / row["iperf_datagrams_per_s"], row["iperf_datagrams_per_s"]))
    print("CSV: %s  figure: %s" % (args.out, plots.plot_host_bench(args.out)))


if __name__ == "__main__":
    main()
