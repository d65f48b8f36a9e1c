"""The program in each Mininet host of a gradient job: a worker, aggregator or PS that
learns its role and its part of the plan from the coordinator (gradients.py), one round
at a time, and moves fragments (gradient_wire.py) on the data plane.

    python -m experiments.traffic.gradient_hosts --name h1 --data-ip 10.0.0.1 \\
        --coordinator 172.30.0.1:7200
"""

import socket
import sys

from experiments.cli import ArgumentParser
from syncfabric.hosts.gradient_wire import (FLOATS_PER_FRAGMENT, FragmentSums, exact_sum_check,
                                               fragment_packet, gradient)
from syncfabric.hosts.stream_return import (RETURN_PORT, ReturnReceiver, ReturnSender,
                                               shard_digest)
from syncfabric.hosts.control_channel import CoordinatedProgram, host_program_arguments
from syncfabric.hosts.pacing import send_streams
from syncfabric.hosts.receivers import RECEIVE_BUFFER_BYTES, SO_RCVBUFFORCE, Watch, drain


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


class Process(CoordinatedProgram):
    """A worker, aggregator or PS: obeys the coordinator, one round at a time."""

    def __init__(self, args):
        super().__init__(args, args.coordinator)
        self.endpoints = {}   # UDP port -> UdpEndpoint
        self.returned_sum = None   # a streaming round's worker: the last round's sum

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
        roles = set(plan["role"].split("+"))   # a PS may also be a worker ("worker+ps")
        floats, number = plan["floats"], plan["round"]
        sums = None
        if roles & {"aggregator", "ps"}:
            sums = FragmentSums(plan["job"], number, floats, plan["expected"])
        returning = None   # a streaming round's PS: its sums, back to the workers
        if "ps" in roles and "return" in plan:
            returning = ReturnSender(sock, (plan["return"]["ip"], RETURN_PORT),
                                     plan["return"]["rate_mbps"], sums.packet)
        returned = None    # a streaming round's worker: the sums coming back
        if "worker" in roles and "returns" in plan:
            returned = ReturnReceiver(plan["returns"]["groups"], self.args.data_ip, plan["job"],
                                      number, floats)

        def on_packet(packet):
            complete = sums.add(packet)
            if complete is None:
                return
            if "aggregator" in roles:   # on at once, even while draining before a report
                _first, _last, ip, port = next(n for n in plan["next"] if n[0] <= complete < n[1])
                sock.sendto(sums.packet(complete), (ip, port))
            elif returning is not None:
                returning.push([complete])
                if returned is not None:   # this host's own shard: back without the network
                    start = complete * FLOATS_PER_FRAGMENT
                    returned.place(complete, sums.total()[start:start + FLOATS_PER_FRAGMENT])
        for endpoint in self.endpoints.values():
            endpoint.on_packet = on_packet if sums is not None else None
        watch = Watch([*self.endpoints.values(), *([returned] if returned else [])], self.channel)

        def idle(seconds):
            pending = returning.wait() if returning else None
            watch.take(seconds if pending is None else min(seconds, pending))
            flush()

        def flush():   # a streaming round's PS: the returns that are due
            if returning is not None:
                returning.send_due()

        if "worker" in roles:
            values = self.worker_values(plan)

            def make(index):
                return fragment_packet(plan["job"], number, index, 1 << plan["index"], values)
        else:
            make = sums.packet
        # a worker's first pass, built before it reports ready, so that at "go" the
        # workers only send (not every process packing datagrams on the same cores)
        first_pass = [((leg["ip"], leg["port"]), [make(i) for i in range(*leg["fragments"])],
                       leg["rate_mbps"]) for leg in plan.get("legs", ())]
        self.channel.send({"ready": number})
        while True:
            control = watch.take(returning.wait() if returning else None)
            flush()
            if not control:
                continue
            request = self.channel.receive()
            if "go" in request:
                if sums is not None and "worker" in roles:   # a PS's own fragments
                    for index in range(*plan["range"]):
                        on_packet(make(index))
                send_streams(sock, first_pass, idle)
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
            elif "return" in request:   # a PS: send again what workers miss, then all queued
                complete = sums.have == sums.expected
                returning.push([i for first, last in request["fragments"]
                                for i in range(first, last) if complete[i]], request["rate_mbps"])
                while returning.wait() is not None:
                    idle(returning.wait())
                self.channel.send({"returned": number})
            elif "return_report" in request:   # a worker: what it still misses
                drain([returned])
                self.channel.send({"missing": returned.missing(),
                                   "digests": returned.digests(plan["returns"]["shards"]),
                                   "completed_at": returned.completed_at})
            elif "sum" in request:
                answer = self.on_sum(plan, sums.total())
                if returning is not None:
                    answer["digest"] = shard_digest(sums.total(), *plan["range"])
                self.channel.send(answer)
            elif "done" in request:
                watch.close()
                if returned is not None:
                    self.returned_sum = returned.values[:floats].copy()
                    returned.close()
                return


def parse_args(argv, prog="python -m experiments.traffic.gradient_hosts", description=__doc__):
    """The command line of a process in a host (this one's, and the training job's)."""
    parser = ArgumentParser(prog=prog, description=description.split("\n\n")[0])
    host_program_arguments(parser, connect_timeout_s=60.0)
    return parser.parse_args(argv)


def main(argv=None):
    Process(parse_args(argv)).serve()


if __name__ == "__main__":
    sys.exit(main())
