"""Sending datagrams at a rate: streams side by side, each paced to its rate of wire
bytes (a number, or a callable for a sender that adapts), waiting for room when a
non-blocking socket's buffer is full."""

import functools
import math
import select
import socket
import time

from syncfabric.hosts.datapath import datapath
from syncfabric.hosts.packets.wire import FRAME_OVERHEAD, HEADER, chunk_packets


def multicast_sender(data_ip):
    """A UDP socket that sends to multicast groups out of the data-plane interface."""
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 8)
    sender.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton(data_ip))
    return sender


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


# Flags of a round's datagrams: MSG_CONFIRM tells the kernel its neighbour is alive (the
# round's answers come back from it), so the neighbour entry stays reachable without ARP,
# which the fabric sends to the controller. Without it, a host whose controller was away
# longer than the kernel's reachable time (15-45 s) lost its neighbours: its rounds failed.
CONFIRM = socket.MSG_CONFIRM
SEND_BUFFER_WAIT_S = 0.05   # at most, for room in a full send buffer, before trying again
# how far behind its schedule a stream may catch up at full speed: a sender held up longer
# (2 cores, 40 processes) sends late rather than in a burst that a meter at its rate, whose
# bucket holds 100 ms, would cut
CATCH_UP_S = 0.02
# a job's sender, awake, sends what falls due this soon rather than sleep for it: on a
# loaded 2-core host a wakeup costs about what a datagram does (at 25 Mbit/s a worker
# sends its 9000-byte fragments in pairs); the burst is well inside a meter's 100 ms bucket
SEND_AHEAD_S = 0.004
BATCH = 64   # datagrams sent in one call of the data path at most (sendmmsg's batch)
FRONT, BACK = 0, 1   # a stream's two ends: guaranteed from the front, borrowed from the back
# a stream out of its window (send_streams) looks again this often, and sends on after
# WINDOW_STALL_S: a datagram lost in flight holds the window until the round's repairs,
# which start once the pass is sent
WINDOW_WAIT_S = 0.0005
WINDOW_STALL_S = 0.05
# a stream in window sends once this many of its datagrams may leave (or all it has
# left): sent as sums came back, a few at a time, a worker's 64 MB pass took 200 calls
# more of the loop and of the data path than it needs (its window holds 64 at least)
WINDOW_LEAST_ROOM = 16


def perf_counter_at(wall_clock):
    """time.perf_counter()'s reading at `wall_clock` (time.time() seconds; None or a time
    past: now), for a moment every host names on the wall clock and one times precisely."""
    now = time.perf_counter()
    return now if wall_clock is None else now + max(0.0, wall_clock - time.time())


def send_streams(sock, streams, idle=None, ahead_s=0.001, start=None, path=None, window=None,
                 borrowing=None, borrow_until=None):
    """streams: [(address, packets, rate_mbps)], sent side by side, each paced to its
    rate of wire bytes (FRAME_OVERHEAD counted per datagram), from `start` (a
    time.perf_counter(); default now); a rate may be a callable giving the rate now, for a
    sender that adapts. packets: a list of bytes, or what the data path `path` (default
    the host's) built. The datagrams due within ahead_s leave at once, in one batch of
    the data path (at most BATCH); idle(seconds), if given, is called instead of sleeping
    while every stream is further ahead of schedule (it may return early).
    window(i, sent): how many more of stream i's datagrams may leave now that `sent` have
    (flow control: a receiver's buffer holds what is in flight); a stream out of window
    (fewer than WINDOW_LEAST_ROOM may leave, and it has more) waits, its receives taken
    by idle, for at most WINDOW_STALL_S at a time.
    borrowing (transport/borrowing.Borrowing), if given: each stream is sent from both
    ends, from the front at its rate in the guaranteed class and from the back at its
    part of the borrowed rate in the borrowed class, until the two meet; the back's
    datagrams due after borrow_until (a time.perf_counter(); None: no end) are the
    front's to send. Returns, per stream, how many of its last datagrams left borrowed."""
    paced = PacedStreams(sock, streams, path or datapath(), borrowing,
                         time.perf_counter() if start is None else start, borrow_until)
    stalled_at = None   # since when every stream due is out of window
    while True:
        pending = paced.pending()
        if not pending:
            return paced.borrowed_counts()
        room = paced.room(window)
        open_ = [(when, end) for when, end in pending
                 if room[end[0]] >= min(WINDOW_LEAST_ROOM, paced.left(end[0]))]
        if not open_:
            stalled_at = stalled_at or time.perf_counter()
            if time.perf_counter() - stalled_at < WINDOW_STALL_S:
                (idle or time.sleep)(WINDOW_WAIT_S)
                continue
            open_, room = pending, {i: BATCH for i in room}   # send on: repairs mend it
        stalled_at = None
        when, end = min(open_)
        now = time.perf_counter()
        if when - now > ahead_s:
            (idle or time.sleep)(when - now)
            continue
        sent, count = paced.send(end, when, now, ahead_s, room[end[0]])
        if sent < count:   # a non-blocking socket's buffer is full: wait for room
            select.select([], [sock], [], SEND_BUFFER_WAIT_S)
        elif idle is not None and count == BATCH:   # a full batch: more is due at once
            idle(0)   # take what came meanwhile (returns, a summing node's fragments)


class PacedStreams:
    """send_streams' streams as they are sent: each stream's ends (FRONT, and BACK with
    borrowing, until borrow_until), when each is next due, and how far each has come."""

    def __init__(self, sock, streams, path, borrowing, now, borrow_until=None):
        self.sock, self.path, self.borrowing = sock, path, borrowing
        self.borrow_until = math.inf if borrow_until is None else borrow_until
        self.streams = [(address, path.pack(packets), rate) for address, packets, rate in streams]
        self.lengths = [path.lengths(packets) for _address, packets, _rate in self.streams]
        # the streams' first datagrams spread over one interval, not all at once: streams in
        # step send a burst of one datagram each per interval, from every sender together
        count = len(self.streams)
        self.due = {(i, FRONT): now + i / count * _interval(sizes[0], rate) if len(sizes) else now
                    for i, ((_address, _packets, rate), sizes)
                    in enumerate(zip(self.streams, self.lengths))}
        self.front, self.back = [0] * count, [len(sizes) for sizes in self.lengths]
        self.backward = {}   # stream -> its datagrams in the opposite order, for its back end
        if borrowing is not None:
            floors = [_rate_now(rate) for _address, _packets, rate in self.streams]
            self.borrowed = [functools.partial(borrowing.rate, floor / sum(floors), address)
                             for floor, (address, _packets, _rate) in zip(floors, self.streams)]
            self.due.update({(i, BACK): now + (i + 0.5) / count
                             * _interval(sizes[-1], self.borrowed[i])
                             for i, sizes in enumerate(self.lengths) if len(sizes)})

    def pending(self):
        """[(when due, (stream, end))] of the ends with datagrams left (a BACK end, due
        before borrow_until, and not late past it: a pass that fell behind sends what is
        left from the front)."""
        borrowing = time.perf_counter() <= self.borrow_until
        return [(when, end) for end, when in self.due.items()
                if self.front[end[0]] < self.back[end[0]]
                and (end[1] == FRONT or borrowing and when <= self.borrow_until)]

    def left(self, i):
        return self.back[i] - self.front[i]

    def room(self, window):
        """{stream: how many of its datagrams may leave now} of the streams with any left."""
        return {i: BATCH if window is None else window(i, len(self.lengths[i]) - self.left(i))
                for i in range(len(self.streams)) if self.left(i) > 0}

    def borrowed_counts(self):
        return [len(sizes) - last for sizes, last in zip(self.lengths, self.back)]

    def send(self, end, when, now, ahead_s, room):
        """Send what end (stream, FRONT | BACK), due at `when`, has due by now + ahead_s
        (at most `room`); (how many left, how many were tried)."""
        i, side = end
        address, packets, rate = self.streams[i]
        sizes = self.lengths[i]
        if side == BACK:
            rate = self.borrowed[i]
            packets = self.backward.get(i) or self.backward.setdefault(
                i, self.path.reversed(packets))
            first, size = len(sizes) - self.back[i], sizes[self.back[i] - 1]
        else:
            first, size = self.front[i], sizes[self.front[i]]
        interval = _interval(int(size), rate)   # the stream's datagrams are alike
        count = min(1 + int((now + ahead_s - when) / interval), BATCH, room, self.left(i))
        if side == BACK:
            with self.borrowing.marked():
                sent = self.path.send(self.sock, packets, first, first + count, address)
            self.back[i] -= sent
        else:
            sent = self.path.send(self.sock, packets, first, first + count, address)
            self.front[i] += sent
        if sent:
            self.due[end] = max(when + (sent - 1) * interval,
                                time.perf_counter() - CATCH_UP_S) + interval
        return sent, count


def _interval(size, rate_mbps):
    """Seconds between datagrams of `size` bytes at rate_mbps (a number or a callable)."""
    return (size + FRAME_OVERHEAD) * 8 / (_rate_now(rate_mbps) * 1e6)


def _rate_now(rate_mbps):
    return rate_mbps() if callable(rate_mbps) else rate_mbps
