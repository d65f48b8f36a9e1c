"""The streaming round's return direction: each PS shard multicasts a fragment's sum on
its reserved tree as soon as the fragment holds every worker, paced at the tree's
rate while later fragments still arrive; each worker assembles the shards' sums.

A returned fragment is a gradient_wire fragment datagram (its mask: every worker), sent
to the shard's tree address on RETURN_PORT. The workers all apply the same step to the
same sum (SwitchML's return), so the bytes a worker holds are checked against the PS's
by SHA-256, shard by shard. A worker notes when its last fragment arrived: that is when
it could start its next round (the hosts share the machine's monotonic clock).
"""

import hashlib
import time
from collections import deque

import numpy as np

from syncfabric.hosts.gradient_wire import FLOATS_PER_FRAGMENT, HEADER, fragment_count
from syncfabric.hosts.receivers import datagrams, receiving_socket
from syncfabric.hosts.wire import FRAME_OVERHEAD, ranges

RETURN_PORT = 7300


def shard_digest(values, first, last):
    """SHA-256 of fragments first..last of float32 `values`, as the wire carries them."""
    start, stop = first * FLOATS_PER_FRAGMENT, min(last * FLOATS_PER_FRAGMENT, len(values))
    return hashlib.sha256(values[start:stop].astype(">f4").tobytes()).hexdigest()


class ReturnSender:
    """A PS's fragments to return, sent one datagram at a time at `rate_mbps` of wire
    bytes whenever the caller's loop asks (send_due), between its receives."""

    def __init__(self, sock, address, rate_mbps, packet_of):
        self.sock, self.address, self.rate_mbps = sock, address, rate_mbps
        self.packet_of = packet_of   # fragment index -> datagram (None: skip it)
        self.queue, self.queued = deque(), set()
        self.due = time.perf_counter()

    def push(self, indices, rate_mbps=None):
        if rate_mbps is not None:
            self.rate_mbps = rate_mbps
        for index in indices:
            if index not in self.queued:
                self.queue.append(index)
                self.queued.add(index)

    def wait(self):
        """Seconds until the next datagram is due; None when nothing is queued."""
        if not self.queue:
            return None
        return max(0.0, self.due - time.perf_counter())

    def send_due(self):
        """Send what is due now (at most the datagrams the rate allows since last time)."""
        now = time.perf_counter()
        self.due = max(self.due, now - 0.002)   # an idle sender does not bank a burst
        while self.queue and self.due <= now:
            index = self.queue.popleft()
            self.queued.discard(index)
            packet = self.packet_of(index)
            if packet is None:   # no longer held (a round a shard no longer keeps)
                continue
            try:
                self.sock.sendto(packet, self.address)
            except BlockingIOError:   # the buffer is full: try this one again later
                self.queue.appendleft(index)
                self.queued.add(index)
                return
            self.due += (len(packet) + FRAME_OVERHEAD) * 8 / (self.rate_mbps * 1e6)


class ReturnReceiver:
    """A worker's copy of the shards' sums, from every shard's tree (or, for its own
    shard, handed over in the host)."""

    def __init__(self, groups, data_ip, job, number, floats):
        self.job, self.number = job, number
        self.values = np.zeros(fragment_count(floats) * FLOATS_PER_FRAGMENT, dtype=np.float32)
        self.floats = floats
        self.have = np.zeros(fragment_count(floats), dtype=bool)
        self.held = 0
        self.completed_at = None   # perf_counter() when the last fragment arrived
        self.sock = receiving_socket("", RETURN_PORT, groups, data_ip)

    def take(self):
        for packet in datagrams(self.sock):
            job, number, index, _count, _mask = HEADER.unpack_from(packet)
            if job == self.job and number == self.number and index < len(self.have):
                self.place(index, np.frombuffer(packet, dtype=">f4", offset=HEADER.size))

    def place(self, index, values):
        start = index * FLOATS_PER_FRAGMENT
        self.values[start:start + len(values)] = values
        if not self.have[index]:
            self.have[index] = True
            self.held += 1
            if self.held == len(self.have):
                self.completed_at = time.perf_counter()

    def missing(self):
        return ranges(np.flatnonzero(~self.have).tolist())

    def digests(self, shards):
        """SHA-256 of each shard [first, last) this worker holds whole (else None)."""
        return [shard_digest(self.values[:self.floats], first, last)
                if self.have[first:last].all() else None for first, last in shards]

    def close(self):
        self.sock.close()
