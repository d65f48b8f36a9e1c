"""Peer-to-peer sync with real update bytes: every worker multicasts its update to the
receivers SELMCAST (or random-p) chose for it, over its round's reserved tree.

    python -m syncfabric.hosts.patterns.peer_sync peer --name h3 --data-ip 10.0.0.3 \\
        --coordinator 172.30.0.1:7100 --update-mb 1

Peers run inside Mininet hosts; the coordinator (SyncCoordinator, run by the
experiment in the root namespace) reaches them over the management network
and the controller over its REST API. Per round:
1. the coordinator asks for a round (POST /selmcast/rounds) and tells each
   peer which groups to send to (its tree; L7: one group per receiver, the
   copies interleaved) at which rate, and which senders' groups to join;
2. every peer makes its update (seeded float32, new bytes each round), joins,
   and answers ready with its SHA-256; on "go" all send at once;
3. repair: each receiver reports the chunks it misses per sender, each sender
   resends them (to the group that misses them) at a share of its rate that
   backs off on loss and probes back up (rate_control.py), until nobody misses
   anything or the repair budget is spent;
   every receiver checks every sender's SHA-256;
4. the coordinator releases the round (DELETE).
Completion is from "go" to the last report with nothing missing; send_s from "go" to
the last sender's last first-pass chunk.
"""

import socket
import sys
import time
from dataclasses import dataclass

from experiments.traffic.launch import run_in_hosts
from syncfabric.hosts.transport.control_channel import accept_named
from syncfabric.hosts.transport.rate_control import LossAdaptiveRate
from syncfabric.hosts.packets.wire import chunk_count, model_bytes, ranges, wire_bytes

COORDINATOR_PORT = 7100


@dataclass
class RoundRoutes:
    """Where a SELMCAST round's updates go, from the round's trees: groups_of: sender ->
    its trees' groups; group_of: (sender, receiver) -> the group between them; receive:
    receiver -> {sender: group}; rate_of: sender -> its trees' rates summed, at the
    round's rate fraction."""
    groups_of: dict
    group_of: dict
    receive: dict
    rate_of: dict

    @classmethod
    def of(cls, plan, names, rate_fraction):
        groups_of = {name: [] for name in names}
        group_of, receive = {}, {name: {} for name in names}
        rate_of = {tree["source"]: 0.0 for tree in plan["trees"]}
        for tree in plan["trees"]:
            groups_of[tree["source"]].append(tree["address"])
            rate_of[tree["source"]] += tree["bandwidth_mbps"] * rate_fraction
            for receiver in tree["receivers"]:
                group_of[tree["source"], receiver] = tree["address"]
                receive[receiver][tree["source"]] = tree["address"]
        return cls(groups_of, group_of, receive, rate_of)

    def planned_send_s(self, size):
        """The slowest sender's first pass: an update of `size` bytes to each of its
        groups, at its rate."""
        return max(wire_bytes(size) * 8 / 1e6 * len(self.groups_of[name]) / self.rate_of[name]
                   for name in self.rate_of)

    def missing(self, reports):
        """{sender: {group: chunk indices}} that the receivers' reports miss."""
        resend = {}
        for receiver, report in reports.items():
            for sender, missing in report["missing"].items():
                group = self.group_of[sender, receiver]
                chunks = resend.setdefault(sender, {}).setdefault(group, set())
                chunks.update(i for first, last in missing for i in range(first, last))
        return resend


class SyncCoordinator:
    """Drives rounds: asks the controller, tells the peers, repairs, releases."""

    def __init__(self, client, listen_ip, names, update_mb, rate_fraction=0.95,
                 repair_budget_s=120.0, connect_timeout_s=30.0):
        self.client = client
        self.update_size = len(model_bytes(update_mb, seed=0))
        self.rate_fraction = rate_fraction   # senders pace a little below their reservation
        self.repair_budget_s = repair_budget_s
        self.listener = socket.create_server((listen_ip, COORDINATOR_PORT))
        self.listener.settimeout(connect_timeout_s)
        self.names = list(names)
        self.peers = {}
        self.rounds = 0

    def accept_peers(self):
        self.peers = accept_named(self.listener, self.names)

    def run_round(self, request):
        """One round on the fabric (request: the POST /selmcast/rounds body minus workers and
        update_mb). The controller is given the update's size on the wire, headers included:
        the bytes that the links, meters and shapers carry, so its t predicts the round."""
        started_setup = time.perf_counter()
        plan = self.client.request("POST", "/selmcast/rounds", dict(
            request, workers=self.names, update_mb=wire_bytes(self.update_size) / 1e6))
        try:
            return dict(self._move_updates(plan, time.perf_counter() - started_setup),
                        plan=plan)
        finally:
            self.client.request("DELETE", "/selmcast/rounds/%d" % plan["id"])

    def _move_updates(self, plan, setup_s):
        self.rounds += 1
        number = self.rounds
        routes = RoundRoutes.of(plan, self.names, self.rate_fraction)
        size = self.update_size
        for name, channel in self.peers.items():
            channel.send({"round": number, "seed": self.names.index(name), "size": size,
                          "send": routes.groups_of[name],
                          "rate_mbps": routes.rate_of.get(name, 1.0),
                          "receive": routes.receive[name]})
        hashes = {}
        for name, channel in self.peers.items():
            reply = channel.receive()
            if reply.get("ready") != number:
                raise RuntimeError("peer %s answered %r to round %d" % (name, reply, number))
            hashes[name] = reply["sha256"]
        started = time.perf_counter()
        for name, channel in self.peers.items():
            channel.send({"go": number, "expected": {s: hashes[s] for s in routes.receive[name]}})
        self._wait_sent(self.names, number)
        send_s = time.perf_counter() - started
        passes, first_pass, reports = self._repair_until_complete(routes, number, started)
        completion_s = time.perf_counter() - started
        for channel in self.peers.values():
            channel.send({"done": number})
        verified = all(all(report["verified"].values()) for report in reports.values())
        deliveries = sum(len(r["verified"]) for r in reports.values())
        return {"completion_s": completion_s, "send_s": send_s, "setup_s": setup_s,
                "repair_passes": passes, "planned_send_s": routes.planned_send_s(size),
                **first_pass, "verified": verified, "deliveries": deliveries}

    def _repair_until_complete(self, routes, number, started):
        """Ask every peer what it misses and have the senders resend it, each backing off
        on loss (LossAdaptiveRate), until nothing is missing; (repair passes, the first
        pass's loss, the last reports). RuntimeError once the repair budget is spent."""
        update_chunks = chunk_count(self.update_size)
        sent = {sender: update_chunks for sender in routes.groups_of if routes.groups_of[sender]}
        rates = {sender: LossAdaptiveRate(1.0) for sender in sent}   # of the planned rate
        passes, first_pass = 0, None
        while True:
            reports = {}
            for name, channel in self.peers.items():
                channel.send({"report": number})
            for name, channel in self.peers.items():
                reports[name] = channel.receive()
            resend = routes.missing(reports)
            worst = {sender: max(len(chunks) for chunks in by_group.values()) / sent[sender]
                     for sender, by_group in resend.items()}
            if first_pass is None:   # the share of (pair, chunk) deliveries lost
                lost = sum(last - first for report in reports.values()
                           for missing in report["missing"].values() for first, last in missing)
                pairs = sum(len(senders) for senders in routes.receive.values())
                first_pass = {"first_pass_loss": lost / (pairs * update_chunks),
                              "lost_chunks": lost}
            if not resend:
                return passes, first_pass, reports
            passes += 1
            if time.perf_counter() - started > self.repair_budget_s:
                raise RuntimeError(
                    "round %d: chunks still missing after %.0f s of repair (%d passes), from %s; "
                    "the senders had backed off to %.0f%% of their reservations and kept losing, "
                    "so the platform is not carrying the round (see `make calibrate`, use a "
                    "lower --bw)" % (number, self.repair_budget_s, passes, ", ".join(sorted(resend)),
                                     100 * min(rates[s].lowest for s in resend)))
            now = time.perf_counter()
            for sender, by_group in resend.items():
                scale = rates[sender].update(worst[sender], now)
                sent[sender] = sum(len(chunks) for chunks in by_group.values())
                self.peers[sender].send({"resend": {group: ranges(sorted(chunks))
                                                    for group, chunks in by_group.items()},
                                         "rate_mbps": routes.rate_of[sender] * scale})
            self._wait_sent(list(resend), number)

    def _wait_sent(self, senders, number):
        for name in senders:
            reply = self.peers[name].receive()
            if reply != {"sent": number}:
                raise RuntimeError("peer %s answered %r while sending round %d" % (name, reply, number))

    def close(self):
        for channel in self.peers.values():
            channel.send({"bye": True})
            channel.sock.close()
        self.listener.close()


def run_peer_sync(bed, workers, update_mb, requests, rate_fraction=0.95, timeout_s=600):
    """Start a peer in each worker host, run one round per request body (the POST
    /selmcast/rounds fields other than workers), stop the peers; returns per-round results.
    RuntimeError with the peers' output if anything fails."""
    command = [sys.executable, "-m", "syncfabric.hosts.patterns.peer_sync", "peer",
               "--coordinator", "%s:%d" % (bed.management_ip, COORDINATOR_PORT),
               "--update-mb", str(update_mb)]
    coordinator = SyncCoordinator(bed.client, bed.management_ip, workers, update_mb, rate_fraction,
                                  connect_timeout_s=timeout_s)

    def drive():
        coordinator.accept_peers()
        results = [coordinator.run_round(request) for request in requests]
        coordinator.close()
        return results
    try:
        return run_in_hosts(bed, workers, command, drive, "peer sync")
    finally:
        coordinator.listener.close()
