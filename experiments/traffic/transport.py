"""Moving bytes between Mininet hosts: a JSON control channel over TCP, and data as
numbered UDP chunks to multicast groups, paced, assembled and verified by SHA-256.
Shared by the PS/worker programs (model_transfer.py) and the peers (peer_sync.py)."""

import hashlib
import json
import os
import select
import selectors
import socket
import struct
import subprocess
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
MTU_ENV = "SYNCFABRIC_MTU"   # the data plane's MTU; the testbed sets it for the programs in hosts


def data_mtu():
    return int(os.environ.get(MTU_ENV, "1500"))


def chunk_payload_bytes():
    """The UDP payload that fills one data-plane MTU."""
    return data_mtu() - 20 - 8


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


def chunk_packets(number, data, indices):
    """Datagrams carrying chunks `indices` of `data` in round `number`."""
    chunks = chunk_count(len(data))
    view = memoryview(data)
    return [HEADER.pack(number, index, chunks) + view[index * CHUNK_BYTES:(index + 1) * CHUNK_BYTES]
            for index in indices]


def send_paced(sender, destinations, number, data, indices, rate_mbps, idle=None):
    """Send chunks `indices` of `data` to every destination (one copy each, interleaved),
    paced so that all copies together take rate_mbps of wire bytes (a number, or a
    callable giving the rate now); returns payload bytes sent. idle(seconds), if given,
    is called instead of sleeping when ahead."""
    packets = chunk_packets(number, data, indices)
    if callable(rate_mbps):
        def share():
            return rate_mbps() / len(destinations)
    else:
        share = rate_mbps / len(destinations)
    send_streams(sender, [(destination, packets, share) for destination in destinations], idle)
    return sum(len(packet) - HEADER.size for packet in packets) * len(destinations)


SEND_BUFFER_WAIT_S = 0.05   # at most, for room in a full send buffer, before trying again


def send_streams(sock, streams, idle=None):
    """streams: [(address, [packets], rate_mbps)], sent side by side, each paced to its
    rate of wire bytes (FRAME_OVERHEAD counted per datagram); a rate may be a callable
    giving the rate now, for a sender that adapts. idle(seconds), if given, is called
    instead of sleeping while every stream is ahead of schedule (it may return early)."""
    now = time.perf_counter()
    # the streams' first datagrams spread over one interval, not all at once: streams in
    # step send a burst of one datagram each per interval, from every sender together
    due = [now + i / len(streams) * _interval(packets[0], rate) if packets else now
           for i, (_address, packets, rate) in enumerate(streams)]
    position = [0] * len(streams)
    while True:
        pending = [(due[i], i) for i, (_address, packets, _rate) in enumerate(streams)
                   if position[i] < len(packets)]
        if not pending:
            return
        when, i = min(pending)
        wait = when - time.perf_counter()
        if wait > 0.001:
            (idle or time.sleep)(wait)
            continue
        address, packets, rate = streams[i]
        packet = packets[position[i]]
        try:
            sock.sendto(packet, address)
        except BlockingIOError:   # a non-blocking socket's buffer is full: wait for room
            select.select([], [sock], [], SEND_BUFFER_WAIT_S)
            continue
        due[i] = when + _interval(packet, rate)
        position[i] += 1


def _interval(packet, rate_mbps):
    """Seconds between datagrams like `packet` at rate_mbps (a number or a callable)."""
    rate = rate_mbps() if callable(rate_mbps) else rate_mbps
    return (len(packet) + FRAME_OVERHEAD) * 8 / (rate * 1e6)


class ChunkReceiver:
    """One round's chunks, sent to a multicast group (or, with group None, to this
    host's own address), assembled into `data`."""

    def __init__(self, group, port, data_ip, number, size):
        self.number, self.data = number, bytearray(size)
        self.have = np.zeros(chunk_count(size), dtype=bool)
        self.last_arrival = None
        self.max_gap_s = 0.0      # the longest silence between datagrams, until frozen
        self.measuring = True
        self.pass_datagrams, self.pass_highest = 0, -1   # this pass's, for progress reports
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER_BYTES)
        self.sock.bind((group or data_ip, port))
        if group:
            membership = socket.inet_aton(group) + socket.inet_aton(data_ip)
            self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
        # Non-blocking: epoll may call a UDP socket readable and then drop the datagram
        # (select(2), BUGS); a blocking recv would then hang the round.
        self.sock.setblocking(False)

    def take(self):
        """Take every datagram waiting (one wake-up, one pass: the receivers' CPU per
        datagram competes with the switches' on this machine)."""
        while True:
            try:
                packet = self.sock.recv(65536)
            except BlockingIOError:
                return
            self._chunk(packet)

    def _chunk(self, packet):
        round_number, index, _chunks = HEADER.unpack_from(packet)
        now = time.perf_counter()
        if self.measuring and self.last_arrival is not None:
            self.max_gap_s = max(self.max_gap_s, now - self.last_arrival)
        self.last_arrival = now
        if round_number != self.number:
            return
        self.pass_datagrams += 1
        self.pass_highest = max(self.pass_highest, index)
        if not self.have[index]:
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
                              "first_pass_max_gap_ms": receiver.max_gap_s * 1000})
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


def run_in_hosts(bed, names, command, drive, what):
    """Start `command --name N --data-ip IP` in each named host of the testbed, run
    drive() (which talks to them), and return its result once they have ended. If
    drive() fails, kill them and raise RuntimeError with the end of their output."""
    processes = [bed.host(name).popen(command + ["--name", name, "--data-ip", bed.host(name).IP()],
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for name in names]
    try:
        result = drive()
    except BaseException as error:
        for process in processes:
            process.kill()
        output = [p.communicate()[0][-600:] for p in processes]
        raise RuntimeError("%s failed: %s\nprocesses: %s" % (what, error, [o for o in output if o])) \
            from error
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
    return result


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


class CoordinatedProgram:
    """A program in a Mininet host run by a coordinator over the management network: it
    says hello with its name, then hands each message to handle() until "bye"."""

    def __init__(self, args, address):
        self.args = args
        self.channel = connect(address, args.connect_timeout_s)
        self.channel.send({"hello": args.name})

    def serve(self):
        while True:
            message = self.channel.receive()
            if "bye" in message:
                return
            self.handle(message)

    def handle(self, message):
        raise NotImplementedError


def host_program_arguments(parser, coordinator=True, connect_timeout_s=30.0):
    """The arguments of every program in a host: its name and data-plane address, and
    (unless it is told whom to reach otherwise) its coordinator."""
    parser.add_argument("--name", required=True, help="this host's name in the fabric")
    parser.add_argument("--data-ip", required=True, help="this host's data-plane address")
    if coordinator:
        parser.add_argument("--coordinator", required=True, help="the coordinator's IP:port")
    parser.add_argument("--connect-timeout-s", type=float, default=connect_timeout_s)


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
    """Newline-delimited JSON over a TCP socket. receive() waits for the next message;
    poll() returns those already here without waiting (a sender reads its receivers'
    progress between datagrams)."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = bytearray()

    def send(self, message):
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def _fill(self, wait):
        """Read what the socket has (waiting for something if `wait`); False if nothing."""
        try:
            data = self.sock.recv(65536, 0 if wait else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        if not data:
            raise ConnectionError("peer closed the control channel")
        self.buffer += data
        return True

    def _next_message(self):
        end = self.buffer.find(b"\n")
        if end < 0:
            return None
        line = bytes(self.buffer[:end])
        del self.buffer[:end + 1]
        return json.loads(line)

    def receive(self):
        while (message := self._next_message()) is None:
            self._fill(wait=True)
        return message

    def poll(self):
        """Every complete message that has arrived, without waiting."""
        while self._fill(wait=False):
            pass
        messages = []
        while (message := self._next_message()) is not None:
            messages.append(message)
        return messages

    def receive_exactly(self, size):
        while len(self.buffer) < size:
            self._fill(wait=True)
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data
