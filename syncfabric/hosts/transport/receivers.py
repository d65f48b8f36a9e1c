"""Receiving chunks: one round's chunks assembled and verified by SHA-256, missing
ranges reported for repair, and several receivers waited on with a control channel."""

import functools
import hashlib
import logging
import selectors
import socket
import time

import numpy as np

from syncfabric.hosts.datapath import datapath
from syncfabric.hosts.packets.wire import HEADER, chunk_bytes, chunk_count, ranges

QUIET_BEFORE_REPORT_S = 0.05             # let in-flight chunks land before reporting
RECEIVE_BUFFER_BYTES = 16 * 1024 * 1024
SO_RCVBUFFORCE = 33  # Linux; lets root exceed net.core.rmem_max (Python has no constant)


LOG = logging.getLogger("syncfabric.hosts")


def set_receive_buffer(sock):
    """RECEIVE_BUFFER_BYTES of receive buffer: past net.core.rmem_max with CAP_NET_ADMIN
    (SO_RCVBUFFORCE), else as much as SO_RCVBUF allows, with a warning once."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER_BYTES)
    except PermissionError:
        warn_buffer_capped()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)


@functools.cache
def warn_buffer_capped():
    LOG.warning("no CAP_NET_ADMIN: receive buffers are capped by net.core.rmem_max (raise it, "
                "or run as root, if bursts are lost)")


def receiving_socket(bind_ip, port, groups=(), data_ip=None, reuse=True, share_port=False):
    """A non-blocking UDP socket bound to bind_ip:port with a large receive buffer, a
    member of every multicast group in `groups` on the data_ip interface, read through
    the host's data path (which may have the kernel coalesce its datagrams: GRO).
    share_port: one of several sockets of this process on the port (SO_REUSEPORT; the
    cores of one summing node: core_split).
    Non-blocking: epoll may call a UDP socket readable and then drop the datagram
    (select(2), BUGS); a blocking recv would then hang the round."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if reuse:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if share_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    set_receive_buffer(sock)
    sock.bind((bind_ip, port))
    for group in groups:
        membership = socket.inet_aton(group) + socket.inet_aton(data_ip)
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
    sock.setblocking(False)
    datapath().prepare_receiver(sock)
    return sock


def datagrams(sock):
    """Every datagram waiting on a non-blocking socket (receiving_socket's), without
    waiting for more."""
    path = datapath()
    while True:
        batch = path.receive(sock)
        if not batch.count:
            return
        # copied out before the caller runs: it may receive on another socket meanwhile
        yield from [batch.packet(i) for i in range(batch.count)]


class ChunkReceiver:
    """One round's chunks, sent to a multicast group (or, with group None, to this
    host's own address), assembled into `data`."""

    def __init__(self, group, port, data_ip, number, size):
        self.number, self.data = number, bytearray(size)
        self.have = np.zeros(chunk_count(size), dtype=bool)
        self.chunk_bytes = chunk_bytes()
        self.last_arrival = None
        self.max_gap_s = 0.0      # the longest silence between datagrams, until frozen
        self.max_gap_ended_at = None   # when it ended (time.time())
        self.measuring = True
        self.pass_datagrams, self.pass_highest = 0, -1   # this pass's, for progress reports
        self.sock = receiving_socket(group or data_ip, port, [group] if group else [], data_ip)

    def take(self):
        """Take every datagram waiting (one wake-up, one pass: the receivers' CPU per
        datagram competes with the switches' on this machine)."""
        for packet in datagrams(self.sock):
            self._chunk(packet)

    def _chunk(self, packet):
        round_number, index, _chunks = HEADER.unpack_from(packet)
        now = time.perf_counter()
        if self.measuring and self.last_arrival is not None:
            if now - self.last_arrival > self.max_gap_s:
                self.max_gap_s = now - self.last_arrival
                self.max_gap_ended_at = time.time()
        self.last_arrival = now
        if round_number != self.number:
            return
        self.pass_datagrams += 1
        self.pass_highest = max(self.pass_highest, index)
        if not self.have[index]:
            payload = packet[HEADER.size:]
            start = index * self.chunk_bytes
            self.data[start:start + len(payload)] = payload
            self.have[index] = True

    def drain(self):
        drain([self])

    def missing(self):
        return ranges(np.flatnonzero(~self.have).tolist())

    def verified(self, sha256):
        return bool(self.have.all()) and hashlib.sha256(self.data).hexdigest() == sha256

    def close(self):
        self.sock.close()


def receive_chunks(channel, receiver, sha256, progress_s=None):
    """Take `receiver`'s chunks while the sender asks over `channel`: {"report": round}
    is answered with the missing ranges and whether the data is complete and matches
    sha256; {"done": round} ends it. With progress_s, every progress_s while chunks
    arrive it also tells the sender how many datagrams of this pass came and the
    highest chunk among them ({"progress": round, ...}), so that it can adapt its rate."""
    number = receiver.number
    selector = selectors.DefaultSelector()
    selector.register(receiver.sock, selectors.EVENT_READ, "data")
    selector.register(channel.sock, selectors.EVENT_READ, "control")
    told = (time.perf_counter(), 0)
    try:
        while True:
            for key, _events in selector.select(progress_s):
                if key.data == "data":
                    receiver.take()
                    continue
                request = channel.receive()
                if request == {"done": number}:
                    return
                if request != {"report": number}:
                    raise RuntimeError("unexpected %r while receiving round %d" % (request, number))
                receiver.drain()
                receiver.measuring = False   # the first pass is over: repairs come in bursts
                channel.send({"missing": receiver.missing(), "sha256_ok": receiver.verified(sha256),
                              "first_pass_max_gap_ms": receiver.max_gap_s * 1000,
                              "first_pass_max_gap_ended_at": receiver.max_gap_ended_at})
                receiver.pass_datagrams, receiver.pass_highest = 0, -1
                told = (time.perf_counter(), 0)
            now = time.perf_counter()
            if progress_s and now - told[0] >= progress_s and receiver.pass_datagrams > told[1]:
                channel.send({"progress": number, "datagrams": receiver.pass_datagrams,
                              "highest": receiver.pass_highest})
                told = (now, receiver.pass_datagrams)
    finally:
        selector.close()


class Watch:
    """A host program's data receivers (each with .sock and .take()) and its control
    channel, waited on together."""

    def __init__(self, receivers, channel):
        self.selector = selectors.DefaultSelector()
        for receiver in receivers:
            self.selector.register(receiver.sock, selectors.EVENT_READ, receiver)
        self.selector.register(channel.sock, selectors.EVENT_READ, None)

    def take(self, seconds=None):
        """Take what arrives within `seconds` (None: wait for something); True if the
        control channel has a message waiting."""
        control = False
        for key, _events in self.selector.select(seconds):
            if key.data is None:
                control = True
            else:
                key.data.take()
        return control

    def close(self):
        self.selector.close()


def drain(receivers):
    """Take every chunk still arriving for any of `receivers` until all their sockets are
    quiet (one quiet period for all: a receiver of many senders reports sooner)."""
    quiet = selectors.DefaultSelector()
    for receiver in receivers:
        quiet.register(receiver.sock, selectors.EVENT_READ, receiver)
    while True:
        ready = quiet.select(QUIET_BEFORE_REPORT_S)
        if not ready:
            break
        for key, _events in ready:
            key.data.take()
    quiet.close()


class Wakeup:
    """What another thread writes to so that a selector loop wakes up (wake); the loop
    registers .sock and empties it when it does (clear)."""

    def __init__(self):
        self.sock, self.writer = socket.socketpair()
        self.sock.setblocking(False)

    def wake(self):
        self.writer.send(b"!")

    def clear(self):
        while True:
            try:
                self.sock.recv(4096)
            except BlockingIOError:
                return

    def close(self):
        self.sock.close()
        self.writer.close()
