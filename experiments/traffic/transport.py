"""Moving bytes between Mininet hosts: a JSON control channel over TCP, and data as
numbered UDP chunks to multicast groups, paced, assembled and verified by SHA-256.
Shared by the PS/worker programs (model_transfer.py) and the peers (peer_sync.py)."""

import hashlib
import json
import selectors
import socket
import struct
import time

import numpy as np

DATA_PORT = 7001
HEADER = struct.Struct("!III")           # round, chunk index, chunk count
CHUNK_BYTES = 1472 - HEADER.size         # a UDP payload that fills a 1500-byte MTU
FRAME_OVERHEAD = 14 + 20 + 8                # Ethernet, IP and UDP headers of a datagram
WIRE_OVERHEAD = FRAME_OVERHEAD + HEADER.size  # ... and our chunk header
QUIET_BEFORE_REPORT_S = 0.05             # let in-flight chunks land before reporting
RECEIVE_BUFFER_BYTES = 16 * 1024 * 1024
SO_RCVBUFFORCE = 33  # Linux; lets root exceed net.core.rmem_max (Python has no constant)


def model_bytes(model_mb, seed=0):
    """model_mb megabytes (1e6) of float32 parameters."""
    count = int(model_mb * 1e6) // 4
    return np.random.default_rng(seed).standard_normal(count, dtype=np.float32).tobytes()


def chunk_count(size):
    return -(-size // CHUNK_BYTES)


def wire_bytes(size):
    """Bytes a `size`-byte payload takes on the links (what meters and shapers count)."""
    return size + chunk_count(size) * WIRE_OVERHEAD


def ranges(indices):
    """Sorted indices as [[first, last_exclusive], ...]."""
    result = []
    for index in indices:
        if result and result[-1][1] == index:
            result[-1][1] += 1
        else:
            result.append([index, index + 1])
    return result


def multicast_sender(data_ip):
    """A UDP socket that sends to multicast groups out of the data-plane interface."""
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 8)
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(data_ip))
    return sender


def send_paced(sender, destinations, number, data, indices, rate_mbps, idle=None):
    """Send chunks `indices` of `data` to every destination (one copy each, interleaved),
    paced so that all copies together take rate_mbps of wire bytes; returns payload
    bytes sent. idle(seconds), if given, is called instead of sleeping when ahead."""
    seconds_per_byte = 8 / (rate_mbps * 1e6)
    chunks = chunk_count(len(data))
    started, on_wire, sent = time.perf_counter(), 0, 0
    view = memoryview(data)
    for index in indices:
        payload = view[index * CHUNK_BYTES:(index + 1) * CHUNK_BYTES]
        packet = HEADER.pack(number, index, chunks) + payload
        for destination in destinations:
            sender.sendto(packet, destination)
            on_wire += len(payload) + WIRE_OVERHEAD
            sent += len(payload)
        due = started + on_wire * seconds_per_byte
        while due - time.perf_counter() > 0.001:   # idle() may return early
            (idle or time.sleep)(due - time.perf_counter())
    return sent


class ChunkReceiver:
    """One multicast group's chunks of one round, assembled into `data`."""

    def __init__(self, group, port, data_ip, number, size):
        self.number, self.data = number, bytearray(size)
        self.have = np.zeros(chunk_count(size), dtype=bool)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER_BYTES)
        self.sock.bind((group, port))
        membership = socket.inet_aton(group) + socket.inet_aton(data_ip)
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
        # Non-blocking: epoll may call a UDP socket readable and then drop the datagram
        # (select(2), BUGS); a blocking recv would then hang the round.
        self.sock.setblocking(False)

    def take(self):
        """Take one datagram if there is one."""
        try:
            packet = self.sock.recv(65536)
        except BlockingIOError:
            return
        round_number, index, _chunks = HEADER.unpack_from(packet)
        if round_number == self.number and not self.have[index]:
            payload = packet[HEADER.size:]
            self.data[index * CHUNK_BYTES:index * CHUNK_BYTES + len(payload)] = payload
            self.have[index] = True

    def drain(self):
        drain([self])

    def missing(self):
        return ranges(np.flatnonzero(~self.have).tolist())

    def verified(self, sha256):
        return bool(self.have.all()) and hashlib.sha256(self.data).hexdigest() == sha256

    def close(self):
        self.sock.close()


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


def connect(address, timeout_s):
    """A Channel to "IP:port", retrying until timeout_s (the other side may not listen yet)."""
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            sock = socket.create_connection((host, int(port)), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    sock.settimeout(None)
    return Channel(sock)


def accept_named(listener, names):
    """{name: Channel} once every one of `names` connected and said hello."""
    channels = {}
    while len(channels) < len(names):
        sock, _address = listener.accept()
        channel = Channel(sock)
        channels[channel.receive()["hello"]] = channel
    unexpected = set(channels) - set(names)
    if unexpected:
        raise RuntimeError("unexpected peers: %s" % ", ".join(sorted(unexpected)))
    return channels


class Channel:
    """Newline-delimited JSON over a TCP socket."""

    def __init__(self, sock):
        self.sock = sock
        self.reader = sock.makefile("rb")

    def send(self, message):
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def receive(self):
        line = self.reader.readline()
        if not line:
            raise ConnectionError("peer closed the control channel")
        return json.loads(line)

    def receive_exactly(self, size):
        data = self.reader.read(size)
        if len(data) != size:
            raise ConnectionError("peer closed after %d of %d bytes" % (len(data), size))
        return data
