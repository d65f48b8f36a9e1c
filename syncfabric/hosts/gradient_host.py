"""The program on each host of a gradient job: a worker, aggregator or PS that learns its
role and its part of the plan from the coordinator (experiments/traffic/gradients.py),
one round at a time, and moves fragments (gradient_wire.py) on the data plane.

    python -m syncfabric.hosts.gradient_host --name h1 --data-ip 10.0.0.1 \\
        --coordinator 10.0.0.254:7200
"""

import sys

from syncfabric.hosts.cli import ArgumentParser, host_program_arguments
from syncfabric.hosts.control_channel import CoordinatedProgram
from syncfabric.hosts.gradient_wire import (FragmentSums, exact_sum_check, floats_per_fragment,
                                            fragment_packet, gradient)
from syncfabric.hosts.pacing import send_streams
from syncfabric.hosts.receivers import Watch, datagrams, drain, receiving_socket


class UdpEndpoint:
    """The data-plane socket of a process: receives on the job's port, sends from it."""

    def __init__(self, data_ip, port):
        self.sock = receiving_socket(data_ip, port, reuse=False)
        self.port = port
        self.on_packet = None

    def take(self):
        """Take every datagram waiting."""
        for packet in datagrams(self.sock):
            if self.on_packet is not None:
                self.on_packet(packet)


class Process(CoordinatedProgram):
    """A worker, aggregator or PS: obeys the coordinator, one round at a time."""

    def __init__(self, args):
        super().__init__(args, args.coordinator)
        self.endpoints = {}   # UDP port -> UdpEndpoint

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
        per_fragment = floats_per_fragment()
        start, stop = first * per_fragment, min(last * per_fragment, plan["floats"])
        ok, ratio = exact_sum_check(total[start:stop], plan["seed"], plan["workers"],
                                    plan["round"], plan["floats"], start)
        return {"verified": ok, "error_to_bound": ratio}

    def _round(self, plan):
        if sorted(self.endpoints) != sorted(plan["ports"]):   # one socket per PS's port
            for endpoint in self.endpoints.values():
                endpoint.sock.close()
            self.endpoints = {port: UdpEndpoint(self.args.data_ip, port) for port in plan["ports"]}
        current = HostRound(self, plan)
        self.channel.send({"ready": plan["round"]})
        while True:
            if not current.watch.take():
                continue
            request = self.channel.receive()
            answer = current.answer(request)
            if answer is not None:
                self.channel.send(answer)
            if "done" in request:
                return


class HostRound:
    """One round of a worker, aggregator or PS (its roles, e.g. "worker+ps", are the
    plan's): what it sums and sends on at once, and its answer to each of the
    coordinator's requests."""

    def __init__(self, process, plan):
        self.process, self.plan = process, plan
        self.sock = next(iter(process.endpoints.values())).sock   # steering matches the port
        self.roles = set(plan["role"].split("+"))
        number = plan["round"]
        self.sums = None
        if self.roles & {"aggregator", "ps"}:
            self.sums = FragmentSums(plan["job"], number, plan["floats"], plan["expected"])
        for endpoint in process.endpoints.values():
            endpoint.on_packet = self.on_packet if self.sums is not None else None
        self.watch = Watch(list(process.endpoints.values()), process.channel)
        if "worker" in self.roles:
            values = process.worker_values(plan)
            self.make = lambda index: fragment_packet(plan["job"], number, index,
                                                      1 << plan["index"], values)
        else:
            self.make = self.sums.packet
        # a worker's first pass, built before it reports ready, so that at "go" the
        # workers only send (not every process packing datagrams on the same cores)
        self.first_pass = [((leg["ip"], leg["port"]),
                            [self.make(i) for i in range(*leg["fragments"])], leg["rate_mbps"])
                           for leg in plan.get("legs", ())]

    def on_packet(self, packet):
        complete = self.sums.add(packet)
        if complete is None:
            return
        if "aggregator" in self.roles:   # on at once, even while draining before a report
            _first, _last, ip, port = next(n for n in self.plan["next"] if n[0] <= complete < n[1])
            self.sock.sendto(self.sums.packet(complete), (ip, port))

    def idle(self, seconds):
        self.watch.take(seconds)

    def answer(self, request):
        """What to tell the coordinator after doing what `request` asks (None: nothing)."""
        number, sums = self.plan["round"], self.sums
        if "go" in request:
            if sums is not None and "worker" in self.roles:   # a PS's own fragments
                for index in range(*self.plan["range"]):
                    self.on_packet(self.make(index))
            send_streams(self.sock, self.first_pass, self.idle)
            return {"sent": number}
        if "resend" in request:
            send_streams(self.sock, [
                ((item["ip"], item["port"]),
                 [self.make(i) for first, last in item["fragments"] for i in range(first, last)],
                 item["rate_mbps"]) for item in request["resend"]], self.idle)
            return {"sent": number}
        if "report" in request:
            drain(list(self.process.endpoints.values()))
            return {"missing": sums.missing() if sums else [],
                    "received_bytes": sums.received_bytes if sums else 0}
        if "sum" in request:
            return self.process.on_sum(self.plan, sums.total())
        if "done" in request:
            self.watch.close()
        return None


def parse_args(argv, prog="python -m syncfabric.hosts.gradient_host", description=__doc__):
    """The command line of a process in a host (this one's, and the training job's)."""
    parser = ArgumentParser(prog=prog, description=description.split("\n\n")[0])
    host_program_arguments(parser, connect_timeout_s=60.0)
    return parser.parse_args(argv)


def main(argv=None):
    Process(parse_args(argv)).serve()


if __name__ == "__main__":
    sys.exit(main())
