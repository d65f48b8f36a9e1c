"""Parameter distribution with real model bytes: the PS and worker programs on their hosts.

    python -m syncfabric.hosts.patterns.model_transfer worker --ps 10.0.0.1 --name h2
    python -m syncfabric.hosts.patterns.model_transfer ps --name h1 --workers h2,h3 --mode path-aware \\
        --controller http://CONTROLLER:8080 --model-mb 5 --rate-mbps 19 --rounds 3

The model is S MB of float32 (numpy, seeded). Workers connect to the PS over
TCP (the control channel) and verify the SHA-256 of what they assembled.
Modes:
- unicast: the PS streams the model over each worker's TCP connection, all at once;
- random / path-aware: per round the PS asks the controller for a multicast
  tree with that policy (POST /multicast/trees), sends the model once by UDP
  to the tree's address at the reserved rate, then repairs: each worker
  reports the chunk ranges it misses (NACK), the PS multicasts their union
  again, until every worker has everything. Then it ends the round and
  releases the tree.
The PS prints one JSON object per round on stdout.
"""

import hashlib
import json
import select
import socket
import sys
import time

from syncfabric.hosts.cli import ArgumentParser, host_program_arguments
from syncfabric.hosts.transport.control_channel import CoordinatedProgram, accept_named
from syncfabric.hosts.transport.controller_client import RESTART_GRACE_S, ControllerClient
from syncfabric.hosts.transport.pacing import multicast_sender, send_paced
from syncfabric.hosts.transport.rate_control import LossAdaptiveRate, ReceiverLoss
from syncfabric.hosts.transport.receivers import ChunkReceiver, receive_chunks
from syncfabric.hosts.packets.wire import DATA_PORT, chunk_count, model_bytes, wire_bytes

CONTROL_PORT = 7000
MULTICAST_MODES = ("random", "path-aware")
MODES = ("unicast",) + MULTICAST_MODES
PROGRESS_S = 0.05                   # how often a receiving worker reports its progress


def unfinished_message(missing_of, size, passes, rate, budget_s):
    """Why a round gave up: who still misses what, and at what rate the sender was."""
    worst = sorted(missing_of.items(), key=lambda item: -item[1])
    missing = ", ".join("%s %d" % (name, count) for name, count in worst if count)
    return ("workers still miss chunks after %.0f s of repair (%d passes): %s of %d; the sender "
            "had backed off to %.2f Mbit/s of %.2f reserved and receivers kept losing, so the "
            "platform is not carrying the tree (see `make calibrate`, use a lower --bw)"
            % (budget_s, passes, missing, chunk_count(size), rate.lowest, rate.ceiling))


class ParameterServer:
    def __init__(self, args):
        self.args = args
        self.model = model_bytes(args.model_mb, args.seed)
        self.sha256 = hashlib.sha256(self.model).hexdigest()
        self.chunks = chunk_count(len(self.model))
        self.controller = (ControllerClient(args.controller, retry_s=RESTART_GRACE_S)
                           if args.controller else None)
        self.workers = {}

    def accept_workers(self, names):
        listener = socket.create_server(("", CONTROL_PORT))
        listener.settimeout(self.args.connect_timeout_s)
        try:
            self.workers = accept_named(listener, names)
        finally:
            listener.close()

    def run_round(self, number):
        if self.args.mode == "unicast":
            return self._unicast_round(number)
        return self._multicast_round(number)

    def _announce(self, number, **fields):
        """Tell every worker how round `number` goes and wait until all are ready."""
        for channel in self.workers.values():
            channel.send(dict(fields, round=number, size=len(self.model), sha256=self.sha256,
                              chunks=self.chunks))
        for channel in self.workers.values():
            reply = channel.receive()
            if reply != {"ready": number}:
                raise RuntimeError("worker answered %r to the round-%d announcement" % (reply, number))

    def _unicast_round(self, number):
        self._announce(number, mode="unicast")
        started = time.perf_counter()
        for channel in self.workers.values():
            channel.sock.setblocking(False)
        pending = {name: memoryview(self.model) for name in self.workers}
        while pending:  # interleave the streams, as N parallel TCP senders would
            for name, rest in list(pending.items()):
                try:
                    sent = self.workers[name].sock.send(rest[:65536])
                except BlockingIOError:
                    continue
                pending[name] = rest[sent:]
                if not pending[name]:
                    del pending[name]
            time.sleep(0.0005)
        for channel in self.workers.values():
            channel.sock.setblocking(True)
        verified = all(channel.receive()["sha256_ok"] for channel in self.workers.values())
        return {"completion_s": time.perf_counter() - started, "tree_setup_s": 0.0,
                "bytes_sent": len(self.model) * len(self.workers), "repair_passes": 0,
                "verified": verified}

    def _multicast_round(self, number):
        setup_started = time.perf_counter()
        tree = self.controller.request("POST", "/multicast/trees", {
            "source": self.args.name, "receivers": sorted(self.workers), "policy": self.args.mode,
            "bandwidth_mbps": self.args.rate_mbps, "ttl_s": self.args.tree_ttl_s})
        try:
            self._announce(number, mode="multicast", group=tree["address"], port=DATA_PORT)
            tree_setup_s = time.perf_counter() - setup_started
            sender = multicast_sender(self.args.data_ip)
            try:
                result = self._send_reliably(number, sender, (tree["address"], DATA_PORT))
            finally:
                sender.close()
            for channel in self.workers.values():
                channel.send({"done": number})
            return dict(result, tree_setup_s=tree_setup_s, tree_id=tree["id"],
                        tree_edges=len(tree["edges"]))
        finally:
            self.controller.request("DELETE", "/multicast/trees/%d" % tree["id"])

    def _send_reliably(self, number, sender, group):
        """Multicast the model, then repair what the workers miss (NACK), at a rate that
        follows their loss reports (rate_control), until every worker has it all or the
        repair budget is spent."""
        rate = LossAdaptiveRate(self.args.rate_mbps)
        started = time.perf_counter()
        wanted, passes, bytes_sent, first_pass = list(range(self.chunks)), 0, 0, None
        while True:
            losses = ReceiverLoss(wanted)
            pass_started = time.perf_counter()
            bytes_sent += send_paced(sender, [group], number, self.model, wanted, rate,
                                     idle=lambda seconds: self._read_progress(seconds, losses, rate))
            send_s = time.perf_counter() - pass_started
            reports = self._reports(number)
            missing_of = {name: sum(last - first for first, last in report["missing"])
                          for name, report in reports.items()}
            if first_pass is None:
                longest = max(reports.values(), key=lambda r: r["first_pass_max_gap_ms"])
                first_pass = {"first_pass_s": send_s,
                              "first_pass_loss": sum(missing_of.values()) / len(wanted)
                              / len(missing_of),
                              "lost_chunks": sum(missing_of.values()),
                              "achieved_mbps": wire_bytes(len(self.model)) * 8 / 1e6 / send_s,
                              # the longest silence any worker saw in the first pass
                              "gap_ms": longest["first_pass_max_gap_ms"],
                              "gap_ended_at": longest["first_pass_max_gap_ended_at"],
                              # the longest run of datagrams any worker lost in it, as the
                              # time they take at the sending rate (the tree's, where every
                              # pass starts): a silence the receivers' scheduling does not
                              # add to, measured alike at any rate
                              "lost_ms": max((last - first for r in reports.values()
                                              for first, last in r["missing"]), default=0)
                              * self.datagram_ms()}
            missing = sorted({i for report in reports.values()
                              for first, last in report["missing"] for i in range(first, last)})
            if not missing:
                break
            rate.update(max(missing_of.values()) / len(wanted), time.perf_counter())
            passes += 1
            if time.perf_counter() - started > self.args.repair_budget_s:
                raise RuntimeError(unfinished_message(missing_of, len(self.model), passes, rate,
                                                      self.args.repair_budget_s))
            wanted = missing
        return dict(first_pass, completion_s=time.perf_counter() - started, bytes_sent=bytes_sent,
                    repair_passes=passes, planned_mbps=self.args.rate_mbps,
                    lowest_rate_mbps=round(rate.lowest, 3),
                    verified=all(r["sha256_ok"] for r in reports.values()))

    def datagram_ms(self):
        """How long one of the model's datagrams takes on the wire at the sending rate."""
        return wire_bytes(len(self.model)) * 8 / self.chunks / (self.args.rate_mbps * 1000)

    def _read_progress(self, seconds, losses, rate):
        """While ahead of schedule: take the workers' progress reports and adapt the rate."""
        channels = {channel.sock: (name, channel) for name, channel in self.workers.items()}
        readable, _, _ = select.select(list(channels), [], [], seconds)
        for sock in readable:
            name, channel = channels[sock]
            for message in channel.poll():
                loss = losses.report(name, message["datagrams"], message["highest"])
                if loss is not None:
                    rate.report(loss, time.perf_counter())

    def _reports(self, number):
        """Every worker's answer to {"report": number}, past the progress it sent before."""
        for channel in self.workers.values():
            channel.send({"report": number})
        reports = {}
        for name, channel in self.workers.items():
            while "missing" not in (reply := channel.receive()):
                pass
            reports[name] = reply
        return reports

    def close(self):
        for channel in self.workers.values():
            channel.send({"bye": True})
            channel.sock.close()


class Worker(CoordinatedProgram):
    def __init__(self, args):
        super().__init__(args, "%s:%d" % (args.ps, CONTROL_PORT))

    def handle(self, message):
        """One round: the model by TCP (unicast) or from the tree (multicast)."""
        if message["mode"] == "unicast":
            self.channel.send({"ready": message["round"]})
            data = self.channel.receive_exactly(message["size"])
            self.channel.send({"sha256_ok": hashlib.sha256(data).hexdigest() == message["sha256"]})
        else:
            self._receive_multicast(message)

    def _receive_multicast(self, announcement):
        receiver = ChunkReceiver(announcement["group"], announcement["port"], self.args.data_ip,
                                 announcement["round"], announcement["size"])
        self.channel.send({"ready": announcement["round"]})
        try:
            receive_chunks(self.channel, receiver, announcement["sha256"], PROGRESS_S)
        finally:
            receiver.close()


def parse_args(argv):
    parser = ArgumentParser(prog="python -m syncfabric.hosts.patterns.model_transfer",
                            description=__doc__.split("\n\n")[0])
    roles = parser.add_subparsers(dest="role", required=True)
    ps = roles.add_parser("ps", help="the parameter server")
    host_program_arguments(ps, coordinator=False)
    ps.add_argument("--workers", required=True, help="comma list of worker host names")
    ps.add_argument("--mode", choices=MODES, required=True)
    ps.add_argument("--controller", help="controller REST URL (needed for multicast modes)")
    ps.add_argument("--model-mb", type=float, default=5.0)
    ps.add_argument("--rate-mbps", type=float, default=19.0,
                    help="reserved bandwidth and multicast sending rate")
    ps.add_argument("--rounds", type=int, default=1)
    ps.add_argument("--seed", type=int, default=0)
    ps.add_argument("--tree-ttl-s", type=float, default=300.0,
                    help="lease on each tree, a safety net if the PS dies")
    ps.add_argument("--repair-budget-s", type=float, default=120.0,
                    help="give up on a round still incomplete this long after it started")
    worker = roles.add_parser("worker", help="a worker")
    host_program_arguments(worker, coordinator=False)
    worker.add_argument("--ps", required=True, help="the PS's data-plane address")
    args = parser.parse_args(argv)
    if args.role == "ps" and args.mode in MULTICAST_MODES and not args.controller:
        parser.error("--controller is needed for mode %s" % args.mode)
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.role == "worker":
        Worker(args).serve()
        return
    server = ParameterServer(args)
    names = args.workers.split(",")
    server.accept_workers(names)
    try:
        for number in range(1, args.rounds + 1):
            result = server.run_round(number)
            print(json.dumps(dict(result, round=number, mode=args.mode, workers=len(names),
                                  model_mb=args.model_mb)), flush=True)
    finally:
        server.close()


if __name__ == "__main__":
    sys.exit(main())
