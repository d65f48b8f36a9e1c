"""Both data paths fed the same datagrams, and what each made of them compared: a
shard's host and an aggregator (on one core and on two), and a worker taking its
shard's sums back. A difference in any sum (NaN equal to NaN), mask, count of drops,
sums queued to send or answer sent is a failure, as is an exception or a crash.

Batches reach a node as a receive would hand them: the Python path's one datagram per
recvfrom, the native path's datagrams laid out in its receive buffer. Scripted recvmmsg
results (hostile.scripted) are cut by the native path's own rule (_native.cut_messages)
and by cut_reference, its rule written in Python; the segments must agree, and both
paths then sum them."""

import socket

import numpy as np

from experiments.fuzzing.hostile import SLOT_BYTES, job_report
from syncfabric.hosts.jobs.core_split import CoreShare
from syncfabric.hosts.datapath import _native
from syncfabric.hosts.datapath.native import NativeBatch, NativeDatapath
from syncfabric.hosts.datapath.python import PythonBatch, PythonDatapath
from syncfabric.hosts.jobs.job_layout import JobLayout
from syncfabric.hosts.jobs.job_roles import AggregatorNode, ShardNode
from syncfabric.hosts.jobs.worker_rounds import ReturnedSums, Round

PATHS = {"python": PythonDatapath(), "native": NativeDatapath(gso=True)}
MSG_TRUNC, MSG_CTRUNC = 0x20, 0x08
CONTROL_BYTES = 24   # the native receive's control buffer: CMSG_SPACE(sizeof(int))


class Difference(AssertionError):
    """The two data paths made different things of the same datagrams."""


class RecordingSocket:
    """A node's socket that records what it sends (answers) instead of sending."""

    def __init__(self):
        self.sent = []

    def sendto(self, packet, *flags_and_address):
        self.sent.append((bytes(packet), flags_and_address[-1]))


def native_batch(datagrams):
    """A NativeBatch holding `datagrams` [(bytes, (address, port))] as a receive would."""
    batch = NativeBatch()
    at = 0
    for i, (packet, (address, port)) in enumerate(datagrams):
        batch.buffer[at:at + len(packet)] = packet
        batch.offsets[i], batch.lengths[i] = at, len(packet)
        batch.sources[i] = int.from_bytes(socket.inet_aton(address), "big")
        batch.ports[i] = port
        at += len(packet)
    batch.count = len(datagrams)
    return batch


def to_batch(path, datagrams):
    if path.name == "native":
        return native_batch(datagrams)
    return PythonBatch([(bytes(packet), source) for packet, source in datagrams])


def summing_nodes(path, kind, cores, layout):
    """A node per core of a shard's host ("shard") or an aggregator ("aggregator"), each
    handing another core's datagrams to it at once (as the daemon's loops do)."""
    nodes = []

    def handoff(core, packet, source):
        nodes[core].datagram(packet, source)
    for core in range(cores):
        share = CoreShare(core, cores, handoff)
        if kind == "shard":
            nodes.append(ShardNode(layout, layout.shards[0], RecordingSocket(), path=path,
                                   share=share))
        else:
            nodes.append(AggregatorNode(layout, layout.aggregations[0], RecordingSocket(),
                                        path=path, share=share))
    return nodes


def node_outcome(node):
    rounds = {n: (s.sums.copy(), s.have.copy(), s.received_bytes) for n, s in node.rounds.items()}
    return {"rounds": rounds, "dropped": node.dropped, "out_of_window": node.out_of_window,
            "taken": node.taken, "queued": list(node.sums_out.queue), "sent": node.sock.sent,
            "truncated": node.truncated, "oversized": node.oversized}


def summed(path, kind, cores, shape, batches):
    """What `path`'s nodes made of batches [(core, [(datagram, source)])]."""
    layout = JobLayout(job_report(*shape, aggregated=kind == "aggregator"))
    nodes = summing_nodes(path, kind, cores, layout)
    for core, datagrams in batches:
        nodes[core % cores].absorb(to_batch(path, datagrams))
    return [node_outcome(node) for node in nodes]


def placed(path, shape, batches, numbers, gather=False):
    """What a worker's ReturnedSums on `path` placed of batches, for open rounds `numbers`
    (of a `gather` job's shard: hostile.job_report)."""
    layout = JobLayout(job_report(*shape, aggregated=False, gather=gather))
    rounds = {n: Round(n, layout) for n in numbers}
    returned = ReturnedSums(layout, layout.shards[0], None, rounds, path)
    for datagrams in batches:
        path.place_sums(to_batch(path, datagrams), returned)
    return {n: (r.result.copy(), r.have.copy(), r.returned) for n, r in rounds.items()}


def same(a, b):
    """Equal, with NaN equal to NaN in float arrays (their bits may differ by path)."""
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def compare(what, outcomes):
    python, native = outcomes["python"], outcomes["native"]
    if not same(python, native):
        raise Difference("%s: the Python path made %r, the native path %r" % (what, python, native))


def check_summing(kind, cores, shape, batches):
    """Both paths' nodes fed `batches`; Difference if they differ. Infinities summed
    overflow, as a hostile sender may make them: numpy need not say so."""
    with np.errstate(over="ignore", invalid="ignore"):
        compare("%s on %d core(s)" % (kind, cores),
                {name: summed(path, kind, cores, shape, batches) for name, path in PATHS.items()})


def check_placing(shape, batches, numbers, gather=False):
    compare("a worker's returned sums" + (" of a gather job" if gather else ""),
            {name: placed(path, shape, batches, numbers, gather) for name, path in PATHS.items()})


def cut_reference(messages, slot_bytes=SLOT_BYTES):
    """The native receive's rule in Python: [(slot, start, length, source, port)] and
    the counts (truncated, oversized) for scripted (msg_len, flags, control, source,
    port) results."""
    segments, truncated, oversized = [], 0, 0
    for slot, (size, flags, control, source, port) in enumerate(messages):
        segment = gro_size(control, flags)
        if flags & MSG_TRUNC or segment is None or size > slot_bytes:
            truncated += 1
            continue
        segment = segment or size
        pieces = 1 if size == 0 else -(-size // segment)
        if pieces > _native.MOST_SEGMENTS:
            oversized += 1
            continue
        segments += [(slot, start, min(segment, size - start), source, port)
                     for start in range(0, max(size, 1), segment or 1)]
    return segments, truncated, oversized


def gro_size(control, flags):
    """The GRO segment size scripted control bytes name (0: none; None: unreadable)."""
    if flags & MSG_CTRUNC:
        return None
    size, at = 0, 0
    while len(control) - at >= 16:
        length = int.from_bytes(control[at:at + 8], "little")
        level = int.from_bytes(control[at + 8:at + 12], "little", signed=True)
        kind = int.from_bytes(control[at + 12:at + 16], "little", signed=True)
        if length < 16 or length > len(control) - at:
            return None
        if level == 17 and kind == 104:
            if length < 20:
                return None
            size = int.from_bytes(control[at + 16:at + 20], "little", signed=True)
            if size <= 0:
                return None
        at += -(-length // 8) * 8
    return size


def check_cutting(messages, slots, shape):
    """The native cut of scripted results against cut_reference; then both paths sum the
    segments as one batch. Returns the number of segments."""
    buffer = bytearray(SLOT_BYTES * len(messages))
    for i, data in enumerate(slots):
        buffer[i * SLOT_BYTES:i * SLOT_BYTES + len(data)] = data
    batch = NativeBatch()
    batch.buffer = buffer
    count, truncated, oversized = _native.cut_messages(
        buffer, SLOT_BYTES, [(size, flags, control, int.from_bytes(socket.inet_aton(source), "big"),
                              port) for size, flags, control, source, port in messages],
        batch.offsets, batch.lengths, batch.sources, batch.ports)
    got = [(int(batch.offsets[i]) // SLOT_BYTES, int(batch.offsets[i]) % SLOT_BYTES,
            int(batch.lengths[i]), socket.inet_ntoa(int(batch.sources[i]).to_bytes(4, "big")),
            int(batch.ports[i])) for i in range(count)]
    expected = cut_reference(messages)
    if (got, truncated, oversized) != expected:
        raise Difference("cutting %r: native %r, reference %r" % (
            messages, (got, truncated, oversized), expected))
    datagrams = [(bytes(buffer[slot * SLOT_BYTES + start:][:length]), (source, port))
                 for slot, start, length, source, port in got]
    check_summing("shard", 1, shape, [(0, datagrams)])
    return count

