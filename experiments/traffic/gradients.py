"""Gradient aggregation with real float32 gradients: workers, aggregators and a PS in
Mininet hosts, steered by an INA plan (apps/ina_controller.py).

    python -m experiments.traffic.gradients --name h1 --data-ip 10.0.0.1 \\
        --coordinator 172.30.0.1:7200

A process learns its role (worker, aggregator or PS) from the coordinator.

Every process connects to the coordinator (GradientCoordinator, run by the
experiment in the root namespace) over the management network. Per round:
1. the coordinator tells each process its part of the plan: a worker its legs
   (destination, fragment range, rate; a worker whose plan splits it sends the
   first part of its fragments to its aggregator and the rest to the PS), an
   aggregator which workers it sums for which fragments and where the
   aggregate goes, the PS how many workers;
2. on "go" every worker sends its seeded gradient as fragments (job, round,
   fragment id, fragment count and the set of workers the fragment carries,
   as a 64-bit mask), paced at each leg's planned rate;
3. an aggregator adds each fragment into the fragment's sum unless one of its
   workers is already in it (a late or repeated copy is never added twice),
   and when a fragment holds all the workers it expects, sends the aggregate
   with their set on to the PS; the PS adds what reaches it the same way;
4. repair: the PS and the aggregators report, per fragment, the workers still
   missing; an aggregator resends the aggregates it has, the workers resend
   what did not reach their aggregator or the PS, at a share of the planned
   rates that backs off on loss and probes back up (rate_control.py); until
   the PS holds every worker in every fragment, or the repair budget is spent;
5. the PS checks the sum against the exact one, computed in float64 from the
   same seeds: every element within the float32 summation bound
   n * 2**-24 * sum_i |g_i| (recursive summation, any order) plus one
   rounding of the result.
Capacities are enforced by the network: an aggregator's link is shaped to its
processing capacity C_s and the PS's to its ingress T (mininet_topos), and a
meter holds every stream to its planned rate.
"""

import selectors
import socket
import struct
import sys
import time

import numpy as np

from experiments import fidelity
from experiments.cli import ArgumentParser
from experiments.traffic.rate_control import LossAdaptiveRate
from experiments.traffic.transport import (FRAME_OVERHEAD, RECEIVE_BUFFER_BYTES, SO_RCVBUFFORCE,
                                           accept_named, connect, drain, ranges, run_in_hosts,
                                           send_streams)

COORDINATOR_PORT = 7200
HEADER = struct.Struct("!IIIIQ")        # job, round, fragment, fragment count, worker mask
FLOATS_PER_FRAGMENT = (1472 - HEADER.size) // 4
MAX_WORKERS = 64
REPAIR_BUDGET_S = 120.0   # a round still incomplete this long after "go" gives up


def gradient(seed, worker, number, floats):
    """Worker `worker`'s gradient in round `number`: seeded standard normal float32."""
    return np.random.default_rng([seed, worker, number]).standard_normal(floats, dtype=np.float32)


def gradient_floats(gradient_mb):
    return int(gradient_mb * 1e6) // 4


def fragment_count(floats):
    return -(-floats // FLOATS_PER_FRAGMENT)


def wire_mbit(floats):
    """Megabits a gradient of `floats` float32 takes on a link, headers included."""
    return (floats * 4 + fragment_count(floats) * (FRAME_OVERHEAD + HEADER.size)) * 8 / 1e6


def exact_sum_check(total, seed, workers, number, floats, start=0):
    """(ok, worst error / bound) of `total`, the sum of elements start.. of every
    worker's gradient, against their float64 sum."""
    stop = start + len(total)
    exact = np.zeros(len(total))
    magnitude = np.zeros(len(total))
    for worker in range(workers):
        g = gradient(seed, worker, number, floats)[start:stop].astype(np.float64)
        exact += g
        magnitude += np.abs(g)
    unit = 2.0 ** -24
    bound = workers * unit * magnitude + unit * np.abs(exact) + np.finfo(np.float32).tiny
    ratio = float(np.max(np.abs(total.astype(np.float64) - exact) / bound))
    return ratio <= 1.0, ratio


def fragment_ranges(split, count):
    """{PS: (first, last)}: the fragments each PS holds, contiguous, in proportion to its
    share of the model (every PS at least one)."""
    bounds, cumulative = [0], 0.0
    for share in list(split.values())[:-1]:
        cumulative += share
        bounds.append(min(count - (len(split) - len(bounds)), max(bounds[-1] + 1,
                                                                  round(cumulative * count))))
    bounds.append(count)
    return {ps: (bounds[i], bounds[i + 1]) for i, ps in enumerate(split)}


def fragment_packet(job, number, index, mask, values):
    """Fragment `index` of float32 `values` as a datagram carrying the workers in `mask`."""
    start = index * FLOATS_PER_FRAGMENT
    return HEADER.pack(job, number, index, fragment_count(len(values)), mask) + \
        values[start:start + FLOATS_PER_FRAGMENT].astype(">f4").tobytes()


class FragmentSums:
    """Per fragment: the running float32 sum and the mask of workers in it."""

    def __init__(self, job, number, floats, expected):
        self.job, self.number, self.floats = job, number, floats
        self.count = fragment_count(floats)
        self.sums = np.zeros(self.count * FLOATS_PER_FRAGMENT, dtype=np.float32)
        self.have = np.zeros(self.count, dtype=np.uint64)
        self.expected = np.asarray(expected, dtype=np.uint64)   # mask per fragment
        self.received_bytes = 0

    def add(self, packet):
        """Add one datagram; returns its fragment if that fragment just became complete."""
        job, number, index, _count, mask = HEADER.unpack_from(packet)
        if job != self.job or number != self.number or index >= self.count:
            return None
        self.received_bytes += len(packet) + FRAME_OVERHEAD
        have = int(self.have[index])
        if mask & have or mask & ~int(self.expected[index]):
            return None   # a worker already counted (late or repeated copy), or not ours
        values = np.frombuffer(packet, dtype=">f4", offset=HEADER.size).astype(np.float32)
        start = index * FLOATS_PER_FRAGMENT
        self.sums[start:start + len(values)] += values
        self.have[index] = have | mask
        return index if have | mask == int(self.expected[index]) else None

    def missing(self):
        """[[fragment, mask of workers missing], ...]."""
        short = np.flatnonzero(self.have != self.expected)
        return [[int(i), int(self.expected[i]) & ~int(self.have[i])] for i in short]

    def packet(self, index):
        """The datagram carrying fragment `index`'s sum and its workers."""
        return fragment_packet(self.job, self.number, index, int(self.have[index]), self.total())

    def total(self):
        return self.sums[:self.floats]


class UdpEndpoint:
    """The data-plane socket of a process: receives on the job's port, sends from it."""

    def __init__(self, data_ip, port):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER_BYTES)
        self.sock.bind((data_ip, port))
        self.sock.setblocking(False)
        self.port = port
        self.on_packet = None

    def take(self):
        """Take every datagram waiting."""
        while True:
            try:
                packet = self.sock.recv(65536)
            except BlockingIOError:
                return
            if self.on_packet is not None:
                self.on_packet(packet)


class Process:
    """A worker, aggregator or PS: obeys the coordinator, one round at a time."""

    def __init__(self, args):
        self.args = args
        self.channel = connect(args.coordinator, args.connect_timeout_s)
        self.channel.send({"hello": args.name})
        self.endpoints = {}   # UDP port -> UdpEndpoint

    def serve(self):
        while True:
            message = self.channel.receive()
            if "bye" in message:
                return
            self.handle(message)

    def handle(self, message):
        """One message from the coordinator between rounds: a round's plan."""
        self._round(message)

    def worker_values(self, plan):
        """What this worker sends in the round: its seeded gradient."""
        return gradient(plan["seed"], plan["index"], plan["round"], plan["floats"])

    def on_sum(self, plan, total):
        """The PS's answer once it holds every worker: the check of its share against the
        exact sum."""
        first, last = plan["range"]
        start, stop = first * FLOATS_PER_FRAGMENT, min(last * FLOATS_PER_FRAGMENT, plan["floats"])
        ok, ratio = exact_sum_check(total[start:stop], plan["seed"], plan["workers"],
                                    plan["round"], plan["floats"], start)
        return {"verified": ok, "error_to_bound": ratio}

    def _round(self, plan):
        if sorted(self.endpoints) != sorted(plan["ports"]):   # one socket per PS's port
            for endpoint in self.endpoints.values():
                endpoint.sock.close()
            self.endpoints = {port: UdpEndpoint(self.args.data_ip, port) for port in plan["ports"]}
        sock = next(iter(self.endpoints.values())).sock   # steering matches the destination port
        role = plan["role"]
        floats, number = plan["floats"], plan["round"]
        sums = None
        if role in ("aggregator", "ps"):
            sums = FragmentSums(plan["job"], number, floats, plan["expected"])
        forward = []   # aggregator: completed fragments not yet sent on

        def on_packet(packet):
            complete = sums.add(packet)
            if complete is not None and role == "aggregator":
                forward.append(complete)
        selector = selectors.DefaultSelector()
        for endpoint in self.endpoints.values():
            endpoint.on_packet = on_packet if sums is not None else None
            selector.register(endpoint.sock, selectors.EVENT_READ, endpoint)
        selector.register(self.channel.sock, selectors.EVENT_READ, None)

        def idle(seconds):
            for key, _events in selector.select(seconds):
                if key.data is not None:
                    key.data.take()
            flush()

        def flush():   # an aggregator sends each aggregate as soon as it is complete
            while forward:
                index = forward.pop(0)
                first, last, ip, port = next(n for n in plan["next"] if n[0] <= index < n[1])
                sock.sendto(sums.packet(index), (ip, port))

        if role == "worker":
            values = self.worker_values(plan)

            def make(index):
                return fragment_packet(plan["job"], number, index, 1 << plan["index"], values)
        else:
            make = sums.packet
        self.channel.send({"ready": number})
        while True:
            for key, _events in selector.select():
                if key.data is not None:
                    key.data.take()
                    flush()
                    continue
                request = self.channel.receive()
                if "go" in request:
                    send_streams(sock, [
                        ((leg["ip"], leg["port"]), [make(i) for i in range(*leg["fragments"])],
                         leg["rate_mbps"]) for leg in plan["legs"]], idle)
                    self.channel.send({"sent": number})
                elif "resend" in request:
                    send_streams(sock, [
                        ((item["ip"], item["port"]),
                         [make(i) for first, last in item["fragments"] for i in range(first, last)],
                         item["rate_mbps"]) for item in request["resend"]], idle)
                    self.channel.send({"sent": number})
                elif "report" in request:
                    drain(list(self.endpoints.values()))
                    flush()
                    self.channel.send({"missing": sums.missing() if sums else [],
                                       "received_bytes": sums.received_bytes if sums else 0})
                elif "sum" in request:
                    self.channel.send(self.on_sum(plan, sums.total()))
                elif "done" in request:
                    selector.close()
                    return


class GradientCoordinator:
    """Runs rounds of a plan (the POST /ina/plans answer) over the processes. pss: the
    PS, or the PSs among which the plan splits the model (each holds a contiguous
    range of fragments, fragment_ranges)."""

    def __init__(self, listen_ip, workers, pss, aggregators, floats, seed=0,
                 rate_fraction=0.95, repair_budget_s=REPAIR_BUDGET_S, connect_timeout_s=60.0):
        if len(workers) > MAX_WORKERS:
            raise ValueError("at most %d workers (the worker mask has 64 bits)" % MAX_WORKERS)
        self.pss = [pss] if isinstance(pss, str) else list(pss)
        self.ps = self.pss[0]
        self.workers, self.aggregators = list(workers), list(aggregators)
        self.floats = floats
        self.seed = seed
        self.rate_fraction = rate_fraction
        self.repair_budget_s = repair_budget_s
        self.listener = socket.create_server((listen_ip, COORDINATOR_PORT))
        self.listener.settimeout(connect_timeout_s)
        self.channels = {}
        self.rounds = 0

    @property
    def names(self):
        return [*self.workers, *self.aggregators, *self.pss]

    def accept(self):
        self.channels = accept_named(self.listener, self.names)

    def run_round(self, plan):
        """One round; returns comm_time_s, repair passes, PS bytes, verified."""
        self.rounds += 1
        number = self.rounds
        count = fragment_count(self.floats)
        bit = {w: 1 << i for i, w in enumerate(self.workers)}
        ip, ports = plan["addresses"], plan["ports"]
        held = fragment_ranges(plan["split"], count)
        ranges_of = {}     # worker -> [(node, ps, first, last, rate)]
        for worker in self.workers:
            pieces = []
            for ps in self.pss:   # per PS: the aggregated part of its range first, then the rest
                legs = sorted((leg for leg in plan["workers"][worker] if leg["ps"] == ps),
                              key=lambda leg: leg["node"] == ps)
                first, end = held[ps]
                size = end - first
                for position, leg in enumerate(legs):
                    last = end if position == len(legs) - 1 else min(end, first + round(leg["share"] * size))
                    pieces.append((leg["node"], ps, first, last, leg["rate_mbps"] * self.rate_fraction))
                    first = last
            ranges_of[worker] = pieces
        expected = {node: np.zeros(count, dtype=np.uint64) for node in self.aggregators + self.pss}
        for worker, pieces in ranges_of.items():
            for node, ps, first, last, _rate in pieces:
                expected[ps][first:last] |= np.uint64(bit[worker])
                if node != ps:
                    expected[node][first:last] |= np.uint64(bit[worker])
        common = {"job": plan["id"], "round": number, "ports": sorted(ports.values()),
                  "floats": self.floats, "seed": self.seed}
        for worker in self.workers:
            self.channels[worker].send(dict(common, role="worker", index=self.workers.index(worker),
                                            legs=[{"ip": ip[node], "port": ports[ps],
                                                   "fragments": [first, last], "rate_mbps": rate}
                                                  for node, ps, first, last, rate in ranges_of[worker]
                                                  if last > first]))
        for aggregator in self.aggregators:
            self.channels[aggregator].send(dict(
                common, role="aggregator", expected=expected[aggregator].tolist(),
                next=[[*held[ps], ip[ps], ports[ps]] for ps in self.pss]))
        for ps in self.pss:
            self.channels[ps].send(dict(common, role="ps", expected=expected[ps].tolist(),
                                        workers=len(self.workers), range=held[ps]))
        self._expect(self.names, {"ready": number})
        aggregate_rate = {(a["aggregator"], a["ps"]): a["rate_mbps"] * self.rate_fraction
                          for a in plan["aggregates"]}
        started = time.perf_counter()
        for worker in self.workers:
            self.channels[worker].send({"go": number})
        self._expect(self.workers, {"sent": number})
        first_pass_s = time.perf_counter() - started
        planned_s = max(max(wire_mbit((last - first) * FLOATS_PER_FRAGMENT) / rate
                            for _node, _ps, first, last, rate in pieces if last > first)
                        for pieces in ranges_of.values())
        passes, sent, first_pass = 0, len(self.workers) * count, None
        scale = LossAdaptiveRate(1.0)   # of every stream's planned rate, for repairs
        while True:
            reports = self._reports([*self.aggregators, *self.pss], number)
            lost = sum(bin(mask).count("1") for ps in self.pss for _f, mask in reports[ps]["missing"])
            if first_pass is None:
                first_pass = {"first_pass_s": first_pass_s, "planned_first_pass_s": planned_s,
                              "first_pass_loss": lost / sent, "lost_fragments": lost}
            if not lost:
                break
            passes += 1
            if time.perf_counter() - started > self.repair_budget_s:
                raise RuntimeError(
                    "round %d: after %.0f s of repair (%d passes), %d worker fragments still miss "
                    "the PS (first: %s); repairs were sent at %.0f%% of the planned rates and kept "
                    "being lost, so the platform is not carrying the plan (see `make calibrate`, "
                    "use a lower --bw)" % (number, self.repair_budget_s, passes, lost, {
                        name: reports[name]["missing"][:3] for name in reports
                        if reports[name]["missing"]}, 100 * scale.lowest))
            scale.update(min(1.0, lost / sent), time.perf_counter())
            resend = self._repairs(reports, ranges_of, bit, aggregate_rate, ip, ports, scale.rate)
            sent = sum(last - first for items in resend.values() for item in items
                       for first, last in item["fragments"])
            for name, items in resend.items():
                self.channels[name].send({"resend": items})
            self._expect(list(resend), {"sent": number})
        comm_time_s = time.perf_counter() - started
        checks = []
        for ps in self.pss:
            self.channels[ps].send({"sum": number})
            checks.append(self.channels[ps].receive())
        check = checks[0] if len(checks) == 1 else {
            "verified": all(c["verified"] for c in checks),
            "error_to_bound": max(c["error_to_bound"] for c in checks)}
        for name in self.names:
            self.channels[name].send({"done": number})
        return {"comm_time_s": comm_time_s, "repair_passes": passes, **first_pass,
                "ps_bytes": sum(reports[ps]["received_bytes"] for ps in self.pss),
                "aggregator_bytes": {a: reports[a]["received_bytes"] for a in self.aggregators},
                **check}

    def _repairs(self, reports, ranges_of, bit, aggregate_rate, ip, ports, scale):
        """{process: [{"ip", "port", "fragments", "rate_mbps"}]} that fill what is missing,
        each stream at `scale` times its planned rate."""
        wanted = {}   # (sender, destination, port, rate) -> fragment indices

        def ask(sender, destination, ps, rate, index):
            wanted.setdefault((sender, ip[destination], ports[ps], rate), set()).add(index)

        def piece(worker, index):
            return next(p for p in ranges_of[worker] if p[2] <= index < p[3])
        incomplete = {a: {f for f, _mask in reports[a]["missing"]} for a in self.aggregators}
        for aggregator in self.aggregators:
            for index, mask in reports[aggregator]["missing"]:
                for worker in self.workers:
                    if mask & bit[worker]:
                        _node, ps, _first, _last, rate = piece(worker, index)
                        ask(worker, aggregator, ps, rate, index)
        for ps in self.pss:
            for index, mask in reports[ps]["missing"]:
                for worker in self.workers:
                    if not mask & bit[worker]:
                        continue
                    node, _ps, _first, _last, rate = piece(worker, index)
                    if node == ps:
                        ask(worker, ps, ps, rate, index)
                    elif index not in incomplete[node]:   # the aggregator has it: send it again
                        ask(node, ps, ps, aggregate_rate[node, ps], index)
        resend = {}
        for (sender, destination, port, rate), indices in wanted.items():
            resend.setdefault(sender, []).append({"ip": destination, "port": port,
                                                  "rate_mbps": rate * scale,
                                                  "fragments": ranges(sorted(indices))})
        return resend

    def _reports(self, names, number):
        for name in names:
            self.channels[name].send({"report": number})
        return {name: self.channels[name].receive() for name in names}

    def _expect(self, names, reply):
        for name in names:
            answer = self.channels[name].receive()
            if answer != reply:
                raise RuntimeError("%s answered %r, expected %r" % (name, answer, reply))

    def close(self):
        for channel in self.channels.values():
            channel.send({"bye": True})
            channel.sock.close()
        self.listener.close()


def run_gradient_rounds(bed, plan, rounds, gradient_mb, seed=0, rate_fraction=0.95,
                        timeout_s=120):
    """Start the processes of `plan` in their hosts, run `rounds` rounds, stop them;
    returns per-round results. RuntimeError with the processes' output if anything fails."""
    aggregators = sorted({a["aggregator"] for a in plan["aggregates"]})
    workers = list(plan["workers"])
    coordinator = GradientCoordinator(bed.management_ip, workers, list(plan["ports"]), aggregators,
                                      gradient_floats(gradient_mb), seed, rate_fraction,
                                      connect_timeout_s=timeout_s)
    command = [sys.executable, "-m", "experiments.traffic.gradients",
               "--coordinator", "%s:%d" % (bed.management_ip, COORDINATOR_PORT)]

    def drive():
        coordinator.accept()
        results = [coordinator.run_round(plan) for _ in range(rounds)]
        coordinator.close()
        return results
    try:
        return run_in_hosts(bed, coordinator.names, command, drive, "gradient rounds")
    finally:
        coordinator.listener.close()


def round_fidelity(result, usage):
    """Whether the emulator kept up with a round (fidelity.verdict): its workers' first
    pass against the time the plan's rates give it, and what the PS missed after it."""
    return fidelity.verdict(1.0, result["planned_first_pass_s"] / result["first_pass_s"],
                            result["first_pass_loss"], result["lost_fragments"], usage)


def run_plan(bed, request, rounds, gradient_mb):
    """Ask for a plan (`request`: the POST /ina/plans body without gradient_mb; the
    controller is given the gradient's size on the wire, headers included, so its
    predicted time is what the links carry), run `rounds` rounds on it, remove it.
    Returns the plan and the rounds' results, each with min_rate_mbps: one worker's
    gradient on the wire over the communication time."""
    gradient_mbit = wire_mbit(gradient_floats(gradient_mb))
    plan = bed.client.request("POST", "/ina/plans", dict(request, gradient_mb=gradient_mbit / 8))
    try:
        results = run_gradient_rounds(bed, plan, rounds, gradient_mb)
    finally:
        bed.client.request("DELETE", "/ina/plans/%d" % plan["id"])
    for result in results:
        result["min_rate_mbps"] = gradient_mbit / result["comm_time_s"]
    return plan, results


def parse_args(argv, prog="python -m experiments.traffic.gradients", description=__doc__):
    """The command line of a process in a host (this one's, and the training job's)."""
    parser = ArgumentParser(prog=prog, description=description.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="this host's name in the fabric")
    parser.add_argument("--data-ip", required=True, help="this host's data-plane address")
    parser.add_argument("--coordinator", required=True, help="the coordinator's IP:port")
    parser.add_argument("--connect-timeout-s", type=float, default=60.0)
    return parser.parse_args(argv)


def main(argv=None):
    Process(parse_args(argv)).serve()


if __name__ == "__main__":
    sys.exit(main())
