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
REPAIR_SPACING = 3  # first passes sent between two repairs while both wait


class PacedSender:
    """Datagrams to send between a loop's receives, each paced at its own rate of wire
    bytes: wait() says when the next is due, send_due() sends what is, in batches of the
    data path. An item is a key, built into its datagram only when it is sent
    (packets_of(keys): the datagrams of the keys still wanted); a key queued twice for
    one address is sent once. nominal_bytes: a datagram's usual size, for how many fall
    due before they are built.

    A key pushed as a repair waits in a queue of its own, and goes out ahead of the first
    passes, one in every REPAIR_SPACING + 1 datagrams while first passes wait: behind
    the first passes of a shard's later rounds, a lost datagram's repair left 1.9 s
    late while the round window held the next round back; ahead of every first pass
    (tried), calls of 25 rounds stalled.

    With `borrowing` (transport/borrowing.Borrowing) it also sends from the back of its
    first passes, at the borrowed rate, in the borrowed class; repairs go only in the
    guaranteed class, and a key sent borrowed that is pushed again as a repair was lost
    (counted). The next borrowed run is due once the last one's bits went by at
    the borrowed rate as it is now: timed at the rate it was sent at, one run at a rate
    near nothing (a window's rate alone just above its floor) put the next seconds
    ahead, and a job's sums borrowed nothing for the rest of its rounds."""

    def __init__(self, sock, packets_of, nominal_bytes, path=None, borrowing=None):
        self.sock, self.packets_of, self.path = sock, packets_of, path or datapath()
        self.nominal_bytes = nominal_bytes
        self.queue, self.queued = deque(), set()   # (key, address, rate); (key, address)
        self.repair_queue = deque()   # (key, address, rate): repairs, ahead of self.queue
        self.since_repair = REPAIR_SPACING   # first passes sent since the last repair
        self.due = time.perf_counter()
        self.borrowing = borrowing
        self.lent_from, self.lent_bits = self.due, 0.0   # the last borrowed run: due, bits
        self.lent = OrderedDict()   # (key, address) sent borrowed lately (LENT_KEPT at most)

    def push(self, keys, address, rate_mbps, repair=False):
        for key in keys:
            if repair and (key, address) in self.lent:   # sent borrowed, and lost
                del self.lent[key, address]
                self.borrowing.count(lost=1)
            if (key, address) not in self.queued:
                (self.repair_queue if repair else self.queue).append((key, address, rate_mbps))
                self.queued.add((key, address))

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
        if not self.queue and not self.repair_queue:
            return None
        due = self.due
        if self._lending():
            due = min(due, self._borrowed_due())
        return max(0.0, due - SEND_AHEAD_S - time.perf_counter())

    def _borrowed_due(self):
        """When the next borrowed run is due: the last one's bits at the rate now."""
        return self.lent_from + self.lent_bits / (self.borrowing.rate() * 1e6)

    def _lending(self):
        """Whether the back of the first passes may go borrowed now."""
        return self.borrowing is not None and self.borrowing.active() and bool(self.queue)

    def send_due(self):
        """Send what is due now or within SEND_AHEAD_S (at most the datagrams the rates
        allow since last time), a run of keys to one address per call of the data path;
        then, if it borrows, from the back what the borrowed rate lets go by now."""
        now = time.perf_counter()
        self.due = max(self.due, now - 0.002)   # an idle sender does not bank a burst
        while (self.queue or self.repair_queue) and self.due <= now + SEND_AHEAD_S:
            front = self._front()
            pace_mbps = front[0][2]
            bits, full = self._send_run(now, self.due, pace_mbps, front)
            self.due += bits / (pace_mbps * 1e6)
            if full:
                return
        while self._lending():
            due = max(self._borrowed_due(), now - 0.002)
            if due > now + SEND_AHEAD_S:
                return
            pace_mbps = self.borrowing.rate()
            bits, full = self._send_run(now, due, pace_mbps, None)
            self.lent_from, self.lent_bits = due, bits
            if full:
                return

    def _front(self):
        """The queue the next run from the front comes from: the repairs once
        REPAIR_SPACING first passes went since the last repair, or when no first pass
        waits; else the first passes."""
        if self.repair_queue and (not self.queue or self.since_repair >= REPAIR_SPACING):
            return self.repair_queue
        return self.queue

    def _send_run(self, now, due, pace_mbps, front):
        """Send one run of keys to one address, as many as pace_mbps lets fall due from
        `due` by now + SEND_AHEAD_S: from the front of `front` (the repairs or the first
        passes) at their rate, or (front None: borrowed) from the back of the first passes
        in the borrowed class. (The bits it put on the wire, whether the socket's buffer
        was full.)"""
        borrowed = front is None
        _key, address, rate = self.queue[-1] if borrowed else front[0]
        nominal = (self.nominal_bytes + FRAME_OVERHEAD) * 8 / (pace_mbps * 1e6)
        room = min(BATCH, 1 + int((now + SEND_AHEAD_S - due) / nominal))
        keys = self._take_run(front, address, rate, self._spaced(front, room))
        wanted, packets = self.packets_of(keys)
        with self.borrowing.marked() if borrowed else contextlib.nullcontext():
            sent = self.path.send(self.sock, packets, 0, len(wanted), address) if wanted else 0
        unsent = wanted[sent:]   # the buffer is full: these again later, where they were
        if borrowed:
            self.queue.extend((key, address, rate) for key in unsent)
            self._lent(wanted[:sent], address)
        else:
            front.extendleft((key, address, rate) for key in reversed(unsent))
            self._spaced_sent(front, sent)
        self._sent(set(keys) - set(unsent), address)
        wire_bytes = int(np.sum(self.path.lengths(packets)[:sent])) + sent * FRAME_OVERHEAD
        return wire_bytes * 8, bool(unsent)

    def _spaced(self, front, room):
        """The room of a run from the front while repairs and first passes both wait: a
        repair at a time, and first passes up to the next repair's turn."""
        if front is self.repair_queue and self.queue:
            return 1
        if front is self.queue and self.repair_queue:
            return max(1, min(room, REPAIR_SPACING - self.since_repair))
        return room

    def _spaced_sent(self, front, sent):
        """Count `sent` datagrams off the front toward the next repair's turn."""
        if not sent:
            return
        if front is self.repair_queue:
            self.since_repair = 0
        else:
            self.since_repair += sent

    def _take_run(self, front, address, rate, room):
        """Up to `room` keys to `address` at `rate` off the front of `front` (or, None:
        borrowed, the back of the first passes), in the queue's order."""
        keys = []
        if front is None:
            while self.queue and len(keys) < room and self.queue[-1][1:] == (address, rate):
                keys.append(self.queue.pop()[0])
            keys.reverse()
        else:
            while front and len(keys) < room and front[0][1:] == (address, rate):
                keys.append(front.popleft()[0])
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
