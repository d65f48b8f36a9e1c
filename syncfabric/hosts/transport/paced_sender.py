"""Datagrams a host sends between its receives, each paced at its own rate (a summing
node's sums, a worker's repairs): PacedSender, and the datagrams of (round, fragment)
keys built a round at a time."""

import contextlib
import time
from collections import OrderedDict, deque

import numpy as np

from syncfabric.hosts.datapath import datapath
from syncfabric.hosts.transport.pacing import BATCH, SEND_AHEAD_S
from syncfabric.hosts.packets.wire import FRAME_OVERHEAD

LENT_KEPT = 65536   # borrowed datagrams remembered, to count those asked for again


class PacedSender:
    """Datagrams to send between a loop's receives, each paced at its own rate of wire
    bytes: wait() says when the next is due, send_due() sends what is, in batches of the
    data path. An item is a key, built into its datagram only when it is sent
    (packets_of(keys): the datagrams of the keys still wanted); a key queued twice for
    one address is sent once. nominal_bytes: a datagram's usual size, for how many fall
    due before they are built.

    With `borrowing` (transport/borrowing.Borrowing) it also sends from the back of its
    queue, at the borrowed rate, in the borrowed class; a key pushed as a repair goes
    only from the front, and one sent borrowed that is pushed again as a repair was
    lost (counted). The next borrowed run is due once the last one's bits went by at
    the borrowed rate as it is now: timed at the rate it was sent at, one run at a rate
    near nothing (a window's rate alone just above its floor) put the next seconds
    ahead, and a job's sums borrowed nothing for the rest of its rounds."""

    def __init__(self, sock, packets_of, nominal_bytes, path=None, borrowing=None):
        self.sock, self.packets_of, self.path = sock, packets_of, path or datapath()
        self.nominal_bytes = nominal_bytes
        self.queue, self.queued = deque(), set()   # (key, address, rate); (key, address)
        self.due = time.perf_counter()
        self.borrowing = borrowing
        self.lent_from, self.lent_bits = self.due, 0.0   # the last borrowed run: due, bits
        self.repairs = set()      # (key, address) queued as repairs: never borrowed
        self.lent = OrderedDict()   # (key, address) sent borrowed lately (LENT_KEPT at most)

    def push(self, keys, address, rate_mbps, repair=False):
        for key in keys:
            if repair and (key, address) in self.lent:   # sent borrowed, and lost
                del self.lent[key, address]
                self.borrowing.count(lost=1)
            if (key, address) not in self.queued:
                self.queue.append((key, address, rate_mbps))
                self.queued.add((key, address))
                if repair:
                    self.repairs.add((key, address))

    def push_copies(self, keys, addresses, rate_mbps, repair=False):
        """Each key to every one of `addresses`, at rate_mbps each: one key's copies one
        after another, so that every address gets its share of the pace from the start."""
        if len(addresses) == 1:
            self.push(keys, addresses[0], rate_mbps, repair)
            return
        for key in keys:
            for address in addresses:
                self.push([key], address, rate_mbps * len(addresses), repair)

    def wait(self):
        """Seconds until the next datagram is due (less SEND_AHEAD_S); None when nothing
        is queued."""
        if not self.queue:
            return None
        due = self.due
        if self._lending():
            due = min(due, self._borrowed_due())
        return max(0.0, due - SEND_AHEAD_S - time.perf_counter())

    def _borrowed_due(self):
        """When the next borrowed run is due: the last one's bits at the rate now."""
        return self.lent_from + self.lent_bits / (self.borrowing.rate() * 1e6)

    def _lending(self):
        """Whether the back of the queue may go borrowed now."""
        return self.borrowing is not None and self.borrowing.active() \
            and (self.queue[-1][0], self.queue[-1][1]) not in self.repairs

    def send_due(self):
        """Send what is due now or within SEND_AHEAD_S (at most the datagrams the rates
        allow since last time), a run of keys to one address per call of the data path;
        then, if it borrows, from the back what the borrowed rate lets go by now."""
        now = time.perf_counter()
        self.due = max(self.due, now - 0.002)   # an idle sender does not bank a burst
        while self.queue and self.due <= now + SEND_AHEAD_S:
            pace_mbps = self.queue[0][2]
            bits, full = self._send_run(now, self.due, pace_mbps, borrowed=False)
            self.due += bits / (pace_mbps * 1e6)
            if full:
                return
        while self.queue and self._lending():
            due = max(self._borrowed_due(), now - 0.002)
            if due > now + SEND_AHEAD_S:
                return
            pace_mbps = self.borrowing.rate()
            bits, full = self._send_run(now, due, pace_mbps, borrowed=True)
            self.lent_from, self.lent_bits = due, bits
            if full:
                return

    def _send_run(self, now, due, pace_mbps, borrowed):
        """Send one run of keys to one address, as many as pace_mbps lets fall due from
        `due` by now + SEND_AHEAD_S: from the front at their rate, or (borrowed) from the
        back in the borrowed class, up to the first repair from the back. (The bits it
        put on the wire, whether the socket's buffer was full.)"""
        _key, address, rate = self.queue[-1 if borrowed else 0]
        nominal = (self.nominal_bytes + FRAME_OVERHEAD) * 8 / (pace_mbps * 1e6)
        keys = self._take_run(address, rate, min(BATCH, 1 + int((now + SEND_AHEAD_S - due)
                                                                / nominal)), borrowed)
        wanted, packets = self.packets_of(keys)
        with self.borrowing.marked() if borrowed else contextlib.nullcontext():
            sent = self.path.send(self.sock, packets, 0, len(wanted), address) if wanted else 0
        unsent = wanted[sent:]   # the buffer is full: these again later, where they were
        if borrowed:
            self.queue.extend((key, address, rate) for key in unsent)
            self._lent(wanted[:sent], address)
        else:
            self.queue.extendleft((key, address, rate) for key in reversed(unsent))
        self._sent(set(keys) - set(unsent), address)
        wire_bytes = int(np.sum(self.path.lengths(packets)[:sent])) + sent * FRAME_OVERHEAD
        return wire_bytes * 8, bool(unsent)

    def _take_run(self, address, rate, room, borrowed):
        """Up to `room` keys to `address` at `rate` off the front (or, borrowed, the back,
        stopping at a repair), in the queue's order."""
        keys = []
        if borrowed:
            while self.queue and len(keys) < room and self.queue[-1][1:] == (address, rate) \
                    and (self.queue[-1][0], address) not in self.repairs:
                keys.append(self.queue.pop()[0])
            keys.reverse()
        else:
            while self.queue and len(keys) < room and self.queue[0][1:] == (address, rate):
                keys.append(self.queue.popleft()[0])
        return keys

    def _lent(self, keys, address):
        """Remember keys sent borrowed (LENT_KEPT at most), to count those asked again."""
        for key in keys:
            self.lent[key, address] = None
        while len(self.lent) > LENT_KEPT:
            self.lent.popitem(last=False)
        self.borrowing.count(sent=len(keys))

    def _sent(self, keys, address):
        for key in keys:
            self.queued.discard((key, address))
            self.repairs.discard((key, address))


def packets_by_round(items, build, path):
    """(the keys kept, their datagrams) for (round, fragment) keys, each round's built at
    once: build(number, indices) -> (the indices built, their datagrams), or None for a
    round no longer wanted. A run of keys is of one round but for rare moments."""
    numbers = sorted({number for number, _index in items})
    kept, packets = [], []
    for number in numbers:
        built = build(number, [index for n, index in items if n == number])
        if built is None:
            continue
        indices, datagrams = built
        kept += [(number, index) for index in indices]
        if len(numbers) == 1:
            return kept, datagrams
        packets += [datagrams[k] for k in range(len(datagrams))]
    return kept, path.pack(packets)


def next_due(senders):
    """Seconds until the first of these PacedSenders has a datagram due; None when none
    has one queued."""
    return min((w for w in (sender.wait() for sender in senders) if w is not None), default=None)
