"""The Python data path: the reference, and the fallback where the native one is not
built. A datagram at a time: one recvfrom, one sendto, one numpy call each. The
summing rules stay in their nodes (job_roles, worker_rounds), which take every datagram
of a batch themselves: a batch is only the datagrams that were waiting."""

import socket
from dataclasses import dataclass, field

import numpy as np

from syncfabric.hosts.packets.gradient_wire import FLOATS, HEADER

CONFIRM = socket.MSG_CONFIRM   # see pacing.CONFIRM
BATCH = 64                     # datagrams a receive takes at most, as the native path


@dataclass
class Summed:
    """What a data path did with a summing node's batch from some datagram on: the
    (round, fragment) pairs it completed and repeated, how many datagrams it dropped
    (out_of_window of them naming a round outside the node's window), and `stop`, the
    datagram it left to the node's own rule (the batch's count: none)."""
    completed: list = field(default_factory=list)
    repeated: list = field(default_factory=list)
    dropped: int = 0
    out_of_window: int = 0
    stop: int = 0


class PythonBatch:
    """Datagrams taken one recvfrom each: packet(i) and source(i), (address, port).
    filled: the receive took all it could, so more may wait. truncated, oversized: none
    (the kernel hands this path every datagram whole, and none is longer than a receive)."""

    truncated = oversized = 0

    def __init__(self, received):
        self.received = received
        self.count = len(received)
        self.filled = self.count == BATCH

    def packet(self, i):
        return self.received[i][0]

    def source(self, i):
        return self.received[i][1]


class PythonDatapath:
    name = "python"
    gso = False

    def prepare_receiver(self, sock):
        """Nothing: this path takes datagrams one by one, never coalesced."""

    def receive(self, sock):
        """Up to BATCH datagrams waiting on non-blocking `sock`, without waiting."""
        received = []
        while len(received) < BATCH:
            try:
                received.append(sock.recvfrom(65536))
            except BlockingIOError:
                break
        return PythonBatch(received)

    def sum_fragments(self, batch, node, first):
        """The batch's datagrams from `first`, each by the node's own rule
        (SummingNode.datagram)."""
        for i in range(first, batch.count):
            node.datagram(batch.packet(i), batch.source(i))
        return Summed(stop=batch.count)

    def place_sums(self, batch, returned):
        """The batch's datagrams, each by the worker's own rule (ReturnedSums.datagram)."""
        for i in range(batch.count):
            returned.datagram(batch.packet(i), batch.source(i)[0])

    def fragments(self, job, number, count, indices, masks, values, starts, per_fragment,
                  floats, out=None):
        """Datagram i: fragment indices[i] of `count` for the workers in masks[i] (or in
        `masks`, one for all), carrying values[starts[i]:][:per_fragment] (fewer at the
        end of `floats`). `out`: a buffer to build them in, where a path builds in one
        (not this one)."""
        masks = np.broadcast_to(np.asarray(masks, dtype=np.uint64), len(indices))
        return [fragment_datagram(job, number, int(index), count, int(mask), values, int(start),
                                  per_fragment, floats)
                for index, mask, start in zip(indices, masks, starts)]

    def pack(self, packets):
        """`packets` (a list of bytes) as this path sends them: as they are."""
        return packets

    def lengths(self, packets):
        return [len(packet) for packet in packets]

    def reversed(self, packets):
        """`packets` in the opposite order (pacing.send_streams sends them from the back)."""
        return list(reversed(packets))

    def send(self, sock, packets, first, stop, address):
        """Send packets[first:stop] to `address`; how many left before the socket's
        buffer filled."""
        for i in range(first, stop):
            try:
                sock.sendto(packets[i], CONFIRM, address)
            except BlockingIOError:
                return i - first
        return stop - first


def fragment_datagram(job, number, index, count, mask, values, start, per_fragment, floats):
    """One fragment's datagram (gradient_wire.HEADER, then its FLOATS)."""
    return HEADER.pack(job, number, index, count, mask) + \
        values[start:min(start + per_fragment, floats)].astype(FLOATS).tobytes()
