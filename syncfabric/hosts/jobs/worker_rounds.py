"""A worker's rounds in flight (fabric_worker): what it gave of each, what came back by
fragment and what to ask again, and the shards' sums coming back on their trees."""

import threading
import time

import numpy as np

from syncfabric.hosts.datapath import datapath
from syncfabric.hosts.packets.gradient_wire import FLOATS, HEADER, carries_fragment
from syncfabric.hosts.packets.control_messages import control_packet, needed_fragments
from syncfabric.hosts.jobs.job_roles import missing_ranges
from syncfabric.hosts.packets.wire import FRAME_OVERHEAD
from syncfabric.hosts.transport.receivers import receiving_socket
from syncfabric.hosts.jobs.warm_arrays import RoundArrays


class Round:
    """One allreduce in flight: the values contributed so far (in the caller's order, a
    block of per_fragment floats per fragment, layout.wire_of; the caller's own array when
    it gives the whole round at once, but a scatter job's: it leaves it alone until the
    Future ends), the
    parts' Futures, and what came back of each shard (by fragment), and when. `owed`:
    by fragment, whether the caller's result holds its sum (all, or a scatter job's
    worker's own shards'): a part's Future ends once those are back; the round ends
    once every fragment is (the others confirmed: confirm), and meanwhile this worker
    may send its parts of them again."""

    def __init__(self, number, layout, result=None, pieces=None, owed=None):
        self.number, self.layout = number, layout
        self.owed = owed   # None: every fragment
        self.values = None   # until the first contribution
        self.pieces = pieces   # gives the array for values given in pieces (default: new)
        # every float is placed before it is read: `result` (warm_arrays.RoundArrays')
        # needs no clearing
        self.result = np.zeros(layout.count * layout.per_fragment, dtype=np.float32) \
            if result is None else result
        self.ready = np.zeros(layout.count, dtype=bool)   # blocks given whole
        self.parts = []     # [start, stop, Future] of each contribution not yet summed
        self.have = np.zeros(layout.count, dtype=bool)   # by fragment
        self.returned = self.checked = 0   # fragments back; when parts were last looked at
        self.sent = False   # every fragment of this worker's went out (its stats may be filed)
        self.sending = False   # a first pass is going out (no repair is asked meanwhile)
        self.sent_on_leg = {}   # leg number -> fragments its first passes sent (WorkerSends)
        self.progress_at = self.asked_at = time.monotonic()
        self.late_said = False   # the log said whom it waits for (round_stalls.stalled)
        self.replies = {}   # shard index -> (when, its last answer's missing [[fragment, mask]])
        self.stats = {"sent": 0, "resent": 0, "repair_requests": 0, "first_pass_s": 0.0,
                      "planned_first_pass_s": 0.0, "borrowed": 0, "borrowed_lost": 0,
                      "generation": None}
        #            (what FabricWorker.stats keeps of it; borrowed: datagrams of the first
        #            pass sent in the borrowed class, borrowed_lost: of those, asked again;
        #            generation: the oldest generation whose rates its first passes went at)
        self.borrowed = set()   # the fragments its first passes sent borrowed, not yet asked

    def contribute(self, start, values, future, whole):
        """Take values[start:...] and its Future; `whole`: the blocks (RoundFilling.take)
        that it completes."""
        if self.values is None and start == 0 and len(values) == self.layout.floats \
                and self.owed is None:   # a scatter job's round outlives its Futures
            self.values = values   # a whole round: read where it is, not copied
        else:
            if self.values is None:   # every float is given before its block is sent
                self.values = np.empty(self.layout.floats, dtype=np.float32) \
                    if self.pieces is None else self.pieces.take()
            self.values[start:start + len(values)] = values
        self.parts.append([start, start + len(values), future])
        self.ready[whole] = True
        self.progress_at = time.monotonic()

    def sent_first_pass(self, streams, seconds, path):
        """Count streams [(address, packets, rate_mbps)] (built by data path `path`) sent
        in `seconds` as first pass."""
        self.stats["first_pass_s"] += seconds
        self.stats["sent"] += sum(len(packets) for _address, packets, _rate in streams)
        self.stats["planned_first_pass_s"] += max(
            [(int(np.sum(path.lengths(packets))) + len(packets) * FRAME_OVERHEAD) * 8 / (rate * 1e6)
             for _address, packets, rate in streams], default=0.0)
        self.progress_at = time.monotonic()

    def packets(self, indices, bit, path, out=None):
        """(the fragments of `indices` given already, their datagrams from the worker
        with `bit`, built by the data path `path`, in `out` if the path builds in a
        buffer and it is large enough)."""
        layout = self.layout
        indices = np.asarray(indices, dtype=np.int64)
        blocks = layout.block_of[indices]
        given = self.ready[blocks]
        if not given.any():
            return [], path.pack([])
        return indices[given].tolist(), path.fragments(
            layout.id, self.number, layout.count, indices[given], bit, self.values,
            blocks[given] * layout.per_fragment, layout.per_fragment, layout.floats, out)

    def place(self, index, values):
        if not self.have[index]:
            start = int(self.layout.block_of[index]) * self.layout.per_fragment
            self.result[start:start + len(values)] = values
            self.have[index] = True
            self.placed(1)

    def confirm(self, shard, address, whole):
        """Shard `shard` of a scatter job, at `address`, says the fragments `whole` names
        ([[first, last exclusive], ...]) are whole in this round: they count as back here
        (their sums stay in its host: this worker's result holds only its own shards'
        sums). Nothing of what no such shard there holds."""
        shards = self.layout.shards
        if not 0 <= shard < len(shards) or shards[shard].address != address:
            return
        indices = np.array(needed_fragments(whole, shards[shard].first, shards[shard].last),
                           dtype=np.int64)
        newly = indices[~self.have[indices]]
        self.have[newly] = True
        if len(newly):
            self.placed(len(newly))

    def placed(self, count):
        """`count` sums came back (place, or the data path placing a batch itself)."""
        self.returned += count
        self.progress_at = time.monotonic()

    def given(self):
        """By fragment: whether this worker gave its floats (a round given in pieces,
        or streamed in by calls shorter than a round, may never be given whole)."""
        return self.ready[self.layout.block_of]

    def awaiting(self):
        """Whether a fragment it gave has not come back (once no pass is going out:
        repairs may be asked, and the round fails if nothing comes back)."""
        return not self.sending and bool((self.given() & ~self.have).any())

    def repair_due(self, now, quiet_s, fail_s):
        """Whether to ask its shards again for what has not come back: quiet_s after its
        last progress or asking; once nothing came back for fail_s (it waits for a late
        worker: round_stalls), every quarter of fail_s, which keeps the shards' answers
        fresh without asking ten times a second for as long as the worker is late."""
        since = now - max(self.progress_at, self.asked_at)
        return since > (quiet_s if now - self.progress_at <= fail_s else fail_s / 4)

    def repair_requests(self, name, now):
        """[(packet, address)]: what it gave and has not come back, asked of each shard
        not held by worker `name` (whose own shards it reads in its host)."""
        self.asked_at = now
        self.stats["repair_requests"] += 1
        settled = self.have | ~self.given()
        needs = [(shard, missing_ranges(settled, shard.first, shard.last))
                 for shard in self.layout.shards if shard.host != name]
        return [(control_packet({"job": self.layout.id, "round": self.number, "need": need}),
                 (shard.address, shard.port)) for shard, need in needs if need]

    def summed_parts(self):
        """The parts whose every fragment is back, taken out of the round (looked at only
        when more came back; a whole round's part is whole when every fragment is)."""
        per_fragment, done = self.layout.per_fragment, []
        if self.returned == self.checked:
            return done
        self.checked = self.returned
        for part in list(self.parts):
            start, stop, _future = part
            blocks = slice(start // per_fragment, (stop - 1) // per_fragment + 1)
            if self.owed is not None:   # a scatter job's: only its own shards' sums
                summed = (self.have | ~self.owed)[self.layout.wire_of[blocks]].all()
            elif stop - start == self.layout.floats:
                summed = self.returned == self.layout.count
            else:
                summed = self.have[self.layout.wire_of[blocks]].all()
            if summed:
                self.parts.remove(part)
                done.append(part)
        return done


class OpenRounds(dict):
    """A worker's rounds in flight by number (a dict: ReturnedSums and the data paths
    look rounds up in it), each made with arrays used again (warm_arrays: `results_ready`
    of them made at once), and a gather job's next `ahead` rounds opened before the
    worker gives them (open_after; its first ones at once). owed: Round's."""

    def __init__(self, layout, ahead, results_ready, owed=None):
        super().__init__()
        self.layout, self.ahead, self.owed = layout, ahead, owed
        self.results = RoundArrays(layout.count * layout.per_fragment,
                                   results_ready + ahead * layout.gather)
        self.pieces = RoundArrays(layout.floats)   # a round's values given in pieces
        self.open_after(0)

    def opened(self, number):
        """Round `number`, opened now if it is not open yet."""
        current = self.get(number)
        if current is None:
            current = self[number] = Round(number, self.layout, self.results.take(),
                                           self.pieces, self.owed)
        return current

    def open_after(self, begun):
        """A gather job's `ahead` rounds after `begun` (the newest round the worker began)
        open before the worker gives them. A gather shard sends its rank's slice of a
        round as soon as that rank gives it, up to `ahead` (the rounds in flight) past the
        newest round any other rank has begun: SubmittedPieces holds a rank's next round
        until its oldest is back, which needs every rank to have given it. A round not
        open here dropped what came, and every datagram of it was asked for again (a
        25-round all-gather took 2.1-2.4x Gloo's)."""
        if self.layout.gather:
            for number in range(begun + 1, begun + 1 + self.ahead):
                self.opened(number)

    def any_given(self):
        """Whether a round open here was given anything (one opened ahead waits for
        nothing yet: no repair timer runs for it)."""
        return any(current.values is not None for current in self.values())

    def hold_behind_the_oldest(self, now):
        """Restart at `now` (time.monotonic()) the quiet time and stall clock (progress_at)
        of every round awaited behind the oldest one awaited: a shard returns its rounds
        in order, so their sums wait behind the oldest's, and they ask the shards again,
        or fail, only once they are the oldest. Asked for meanwhile, every round of a
        25-round all-gather was asked of every shard 3 to 5 times, every ask answered,
        and none sped a sum up; and behind a rank late to its call, they would fail at
        round_fail_s while the oldest waits for it (round_stalls)."""
        awaited = [current for _number, current in sorted(self.items()) if current.awaiting()]
        for current in awaited[1:]:
            current.progress_at = now


class RoundFilling:
    """Which round the caller's pieces go to: the one being filled until it has every
    float, then the next (FabricWorker.reduce_part)."""

    def __init__(self, layout):
        self.layout, self.next_round, self.filling = layout, 1, None
        self.lock = threading.Lock()

    def stream_offset(self):
        """Where the next floats streamed in (FabricWorker.allreduce_async) go in the
        round being filled: after what it has (0: a new round); ValueError if that
        round was given out of order (reduce_part), which streaming would leave holes in."""
        with self.lock:
            if self.filling is None:
                return 0
            number, filled = self.filling
            end = int(np.argmin(filled))   # filled is not whole: it would be None
            if filled[end:].any():
                raise ValueError("round %d of job %d is being given in pieces out of order "
                                 "(reduce_part): give the rest of it before streaming more"
                                 % (number, self.layout.id))
            return end

    def take(self, start, stop):
        """(the round that floats start..stop-1 go to, the blocks they complete, whether
        the round is now whole); ValueError if they cannot go."""
        with self.lock:
            if not 0 <= start < stop <= self.layout.floats:
                raise ValueError("job %d rounds %d float32 values: %d..%d is not among them"
                                 % (self.layout.id, self.layout.floats, start, stop))
            if self.filling is None:
                if start == 0 and stop == self.layout.floats:   # whole: nothing to keep
                    self.next_round += 1
                    return self.next_round - 1, list(range(self.layout.count)), True
                self.filling = (self.next_round, np.zeros(self.layout.floats, dtype=bool))
                self.next_round += 1
            number, filled = self.filling
            if filled[start:stop].any():
                raise ValueError("floats %d..%d of round %d were given already"
                                 % (start, stop, number))
            filled[start:stop] = True
            per_fragment = self.layout.per_fragment
            first, last = start // per_fragment, (stop - 1) // per_fragment
            ends = {b for b in (first, last)   # the blocks between are inside the piece
                    if filled[b * per_fragment:(b + 1) * per_fragment].all()}
            whole = sorted(ends | set(range(first + 1, last)))
            complete = bool(filled.all())
            if complete:
                self.filling = None
            return number, whole, complete


class ReturnedSums:
    """A shard's sums coming back to a worker on the shard's tree, each placed into its
    round (rounds: {number: Round} of the rounds open here); only the shard's host may
    send them, and only whole sums (JobLayout.whole_mask: every worker in them) count.
    The host's data path takes them in batches and places them itself where it can."""

    def __init__(self, layout, shard, sock, rounds, path=None):
        self.layout, self.shard, self.sock, self.rounds = layout, shard, sock, rounds
        self.path = path or datapath()

    @classmethod
    def heard_by(cls, layout, shard, name, address, rounds, path):
        """The sums of `shard` as worker `name` hears them: on the shard's group for it, at
        the shard's port, received on `name`'s data address."""
        group = shard.group_of(name)
        return cls(layout, shard, receiving_socket(group, shard.port, [group], address),
                   rounds, path)

    @classmethod
    def every_one_heard_by(cls, layout, name, address, rounds, path):
        """The sums that come back to worker `name` (heard_by), of every shard held in
        another host: a shard in its own host is summed there, and a scatter job's sums
        stay in their shards' hosts."""
        if layout.scatter:
            return []
        return [cls.heard_by(layout, shard, name, address, rounds, path)
                for shard in layout.shards if shard.host != name]

    def take(self):
        """Place the sums waiting on the socket, a batch at a time until one finds it
        empty."""
        while True:
            batch = self.path.receive(self.sock)
            self.path.place_sums(batch, self)
            if not batch.filled:
                return

    def datagram(self, packet, address):
        """One datagram from `address`: placed if it is a whole sum of this shard."""
        shard, layout = self.shard, self.layout
        if address != shard.address or len(packet) < HEADER.size:
            return
        job, number, index, _count, mask = HEADER.unpack_from(packet)
        current = self.rounds.get(number)
        if job == layout.id and mask == layout.whole_mask(shard) and current is not None \
                and shard.first <= index < shard.last \
                and carries_fragment(packet, layout.floats, layout.per_fragment, index):
            current.place(index, np.frombuffer(packet, dtype=FLOATS, offset=HEADER.size))

