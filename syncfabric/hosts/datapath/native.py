"""The native data path: _native.c moves datagrams in batches and builds and sums
fragments, with the GIL released; this module holds its buffers and turns the nodes'
state into the arrays it reads. What C leaves (control messages, rounds to open) goes to
the nodes' own per-datagram rule, as in the Python path."""

import errno
import logging
import socket
import threading
import weakref

import numpy as np

from syncfabric.hosts.datapath import _native
from syncfabric.hosts.datapath.python import Summed
from syncfabric.hosts.packets.gradient_wire import HEADER

LOG = logging.getLogger("syncfabric.hosts")
SLOT_BYTES = 65536      # a datagram, or a GRO super-datagram, at most
SLOTS = 8   # datagrams (or GRO runs) one receive takes at most: 512 KB, still in cache when summed
# segments of one GRO super-datagram at most: the kernel's UDP_MAX_SEGMENTS, 128 since Linux
# 6.10 (64 before), which it does not expose; a datagram of more is dropped and counted
MOST_SEGMENTS = _native.MOST_SEGMENTS
UDP_GRO = 104           # Linux's socket option (Python 3.11 has no constant)
GSO_ERRORS = (errno.EIO, errno.EINVAL, errno.EOPNOTSUPP, errno.EMSGSIZE)
REPEATED = _native.REPEATED   # a datagram's status: its fragment was complete already


class NativeBatch:
    """A thread's receive buffers: datagram i is buffer[offsets[i]:][:lengths[i]], from
    sources[i] (IPv4, host order) and ports[i]; count of them hold a round's datagrams.
    filled: the receive took all it could, so more may wait. truncated, oversized: the
    datagrams the receive dropped (longer than a slot or with a control message cut
    short; more segments than MOST_SEGMENTS)."""

    def __init__(self):
        self.buffer = bytearray(SLOT_BYTES * SLOTS)
        capacity = SLOTS * MOST_SEGMENTS
        self.offsets = np.zeros(capacity, dtype=np.int64)
        self.lengths = np.zeros(capacity, dtype=np.int64)
        self.sources = np.zeros(capacity, dtype=np.uint32)
        self.ports = np.zeros(capacity, dtype=np.uint16)
        self.status = np.zeros(capacity, dtype=np.int8)
        self.completed = np.zeros(2 * capacity, dtype=np.int64)
        self.count = self.truncated = self.oversized = 0
        self.filled = False

    def packet(self, i):
        start = int(self.offsets[i])
        return bytes(self.buffer[start:start + int(self.lengths[i])])

    def source(self, i):
        return socket.inet_ntoa(int(self.sources[i]).to_bytes(4, "big")), int(self.ports[i])


class NativeDatagrams:
    """Datagrams built or packed for sending: datagram i is buffer[offsets[i]:][:lengths[i]],
    then, for fragments, bytes payload_offsets[i]..+payload_lengths[i] of `payload`, the
    caller's float32 array, which the kernel copies from as it sends (no pass builds
    them). sizes[i]: datagram i's bytes."""

    def __init__(self, buffer, offsets, lengths, payload=None, payload_offsets=None,
                 payload_lengths=None):
        self.buffer, self.offsets, self.lengths = buffer, offsets, lengths
        self.payload, self.payload_offsets = payload, payload_offsets
        self.payload_lengths = payload_lengths
        self.sizes = lengths if payload is None else lengths + payload_lengths

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, i):
        start = int(self.offsets[i])
        head = bytes(self.buffer[start:start + int(self.lengths[i])])
        if self.payload is None:
            return head
        start = int(self.payload_offsets[i])
        floats = self.payload.view(np.uint8)[start:start + int(self.payload_lengths[i])]
        return head + floats.tobytes()


class NativeDatapath:
    name = "native"

    def __init__(self, gso):
        self.gso = gso
        self.local = threading.local()
        self.no_gso = weakref.WeakSet()   # sockets whose path refused a GSO send
        self.ips = {}

    def _batch(self):
        batch = getattr(self.local, "batch", None)
        if batch is None:
            batch = self.local.batch = NativeBatch()
        return batch

    def prepare_receiver(self, sock):
        """GRO on `sock` (with GSO on): the kernel may hand it a run of datagrams at once."""
        if self.gso:
            try:
                sock.setsockopt(socket.IPPROTO_UDP, UDP_GRO, 1)
            except OSError:
                pass   # an older kernel: one datagram at a time

    def receive(self, sock):
        """The datagrams waiting on non-blocking `sock` (up to SLOTS, GRO's cut apart),
        in this thread's buffers: valid until this thread's next receive."""
        batch = self._batch()
        batch.count, batch.filled, batch.truncated, batch.oversized = _native.recv_batch(
            sock.fileno(), batch.buffer, SLOT_BYTES, batch.offsets, batch.lengths, batch.sources,
            batch.ports)
        return batch

    def sum_fragments(self, batch, node, first):
        """The batch's fragments from `first` summed in C, up to the first datagram left
        to the node's own rule (SummingNode.datagram): a control message, or a round it
        opens. A round outside its window is refused in C, counted as the node counts it.
        Summed.stop: that datagram (batch.count: none)."""
        layout = node.layout
        kept = list(node.rounds.items())
        window_low, window_high = node.window.bounds()
        stop, completed, received, dropped, out_of_window, repeated = _native.sum_fragments(
            batch.buffer, batch.offsets, batch.lengths, batch.sources, first, batch.count,
            layout.id, layout.count, layout.per_fragment, layout.floats, node.held.size,
            node.held.slot,
            node.sender_addresses,
            node.sender_masks, node.expected, [(n, s.sums, s.have) for n, s in kept],
            window_low, window_high, batch.status, batch.completed)
        for (_number, sums), added in zip(kept, received):
            sums.received_bytes += added
        summed = Summed(completed=batch.completed[:2 * completed].reshape(-1, 2).tolist(),
                        dropped=dropped + out_of_window, out_of_window=out_of_window, stop=stop)
        if not repeated:
            return summed
        for i in first + np.flatnonzero(batch.status[first:stop] == REPEATED):
            start = int(batch.offsets[i])
            summed.repeated.append((int.from_bytes(batch.buffer[start + 4:start + 8], "big"),
                                    int.from_bytes(batch.buffer[start + 8:start + 12], "big")))
        return summed

    def place_sums(self, batch, returned):
        """The shard's sums for the worker's open rounds copied in C (ReturnedSums.datagram's
        rule; a datagram that fits no open round is not taken)."""
        layout, shard = returned.layout, returned.shard
        rounds = list(returned.rounds.items())
        placed = _native.place_sums(
            batch.buffer, batch.offsets, batch.lengths, batch.sources, batch.count,
            self._ip(shard.address), layout.id, layout.whole_mask(shard), shard.first,
            shard.last, layout.count, layout.per_fragment, layout.floats, layout.block_of,
            [(n, r.result, r.have) for n, r in rounds])
        for (_number, current), count in zip(rounds, placed):
            if count:
                current.placed(count)

    def fragments(self, job, number, count, indices, masks, values, starts, per_fragment,
                  floats, out=None):
        """PythonDatapath.fragments: their headers built in C into one buffer (`out`, if
        large enough: a new one costs a page fault per 4 KB), their floats left in
        `values`, which must not change until they are sent."""
        indices = np.ascontiguousarray(indices, dtype=np.uint32)
        size = len(indices)
        masks = np.ascontiguousarray(np.broadcast_to(np.asarray(masks, dtype=np.uint64), size))
        starts = np.ascontiguousarray(starts, dtype=np.int64)
        values = np.ascontiguousarray(values, dtype=np.float32)
        needed = size * HEADER.size
        buffer = out if out is not None and len(out) >= needed else bytearray(needed)
        offsets, lengths, payload_offsets, payload_lengths = (
            np.zeros(size, dtype=np.int64) for _piece in range(4))
        _native.build_fragments(buffer, offsets, lengths, payload_offsets, payload_lengths, job,
                                number, count, indices, masks, values, starts, per_fragment,
                                floats)
        return NativeDatagrams(buffer, offsets, lengths, values, payload_offsets, payload_lengths)

    def pack(self, packets):
        """`packets` (bytes each, or NativeDatagrams) as NativeDatagrams."""
        if isinstance(packets, NativeDatagrams):
            return packets
        lengths = np.fromiter(map(len, packets), dtype=np.int64, count=len(packets))
        offsets = np.zeros(len(packets), dtype=np.int64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        return NativeDatagrams(b"".join(packets), offsets, lengths)

    def lengths(self, packets):
        return self.pack(packets).sizes

    def reversed(self, packets):
        """`packets` packed in the opposite order, without a copy of their bytes: what a
        two-ended sender sends from the back (pacing.send_streams)."""
        packets = self.pack(packets)

        def backward(array):
            return None if array is None else np.ascontiguousarray(array[::-1])
        return NativeDatagrams(packets.buffer, backward(packets.offsets),
                               backward(packets.lengths), packets.payload,
                               backward(packets.payload_offsets),
                               backward(packets.payload_lengths))

    def send(self, sock, packets, first, stop, address):
        """Send packets[first:stop] to `address` in batches (GSO where it works: a socket
        whose send it fails on sends without from then on); how many left before the
        socket's buffer filled."""
        packets = self.pack(packets)
        gso = self.gso and sock not in self.no_gso
        try:
            return _native.send_batch(sock.fileno(), packets.buffer, packets.offsets,
                                      packets.lengths, packets.payload, packets.payload_offsets,
                                      packets.payload_lengths, first, stop,
                                      self._ip(address[0]), address[1], gso)
        except OSError as error:
            if not gso or error.errno not in GSO_ERRORS:
                raise
            LOG.info("UDP GSO refused toward %s (%s): sending without it", address[0], error)
            self.no_gso.add(sock)
            return self.send(sock, packets, first, stop, address)

    def _ip(self, address):
        ip = self.ips.get(address)
        if ip is None:
            ip = self.ips[address] = int.from_bytes(socket.inet_aton(address), "big")
        return ip
