"""What a worker sends (fabric_worker): each round's first pass, built by the host's
data path, paced at its legs' planned rates and held to a window (a summing node's
receive buffer, shared by its workers, holds what is in flight: no datagram is lost to
an overflow at any rate), and the fragments its shards ask again (the outbox, paced
between the I/O thread's receives), answering the shards' requests for them."""

import time
from collections import Counter

import numpy as np

from syncfabric.hosts.packets.control_messages import control_message, missing_pairs, whole
from syncfabric.hosts.packets.gradient_wire import HEADER
from syncfabric.hosts.transport.borrowing import Borrowing
from syncfabric.hosts.transport.paced_sender import PacedSender, packets_by_round
from syncfabric.hosts.transport.pacing import BATCH, SEND_AHEAD_S, perf_counter_at, send_streams
from syncfabric.hosts.transport.receivers import RECEIVE_BUFFER_BYTES


class WorkerSends:
    """Worker `name`'s sends on `sock`, for its `rounds` in flight ({number: Round}), at
    rate_fraction of the planned rates of each round (rates: rate_following.RateSchedule),
    through data path `path`."""

    def __init__(self, layout, name, sock, rounds, rate_fraction, path, rates):
        self.layout, self.name, self.sock, self.rounds = layout, name, sock, rounds
        self.rates = rates
        self.bit, self.rate_fraction, self.path = layout.bit[name], rate_fraction, path
        self.outbox = PacedSender(sock, self._resent_packets,
                                  HEADER.size + 4 * layout.per_fragment, path)
        # how many workers send to each summing node: they share its receive buffer
        self.senders_to = Counter((leg.address, leg.port) for legs in layout.legs.values()
                                  for leg in legs)
        self.legs, self.leg_numbers = layout.legs.get(name, []), layout.leg_numbers(name)
        self.scratch = {}   # leg number -> the buffer its first passes are built in
        # beyond its legs' rates, in the borrowed class, if the job allows it (a first
        # pass from both ends: pacing.send_streams); repairs go at the legs' rates
        self.borrowing = Borrowing.of(sock, layout.borrow)
        self.shard_addresses = {shard.address for shard in layout.shards}   # may ask repairs

    def window(self, leg):
        """How many of a leg's fragments may be in flight (sent, their sum not back): half
        the summing node's receive buffer (the kernel counts a datagram's buffers, more
        than its bytes), shared by the workers that send to it."""
        datagram = HEADER.size + 4 * self.layout.per_fragment
        return max(BATCH, RECEIVE_BUFFER_BYTES // 2 // self.senders_to[leg.address, leg.port]
                   // datagram)

    def first_pass(self, current, whole, own, start_at, idle, borrow_until=None,
                   rate_factor=None):
        """Send the fragments of blocks `whole` of round `current` from start_at (see
        FabricWorker.allreduce_async), borrowing until borrow_until (time.time(); None:
        no end; phase_windows.PhaseWindow.borrow_until), from the start up to rate_factor
        times its floor in all (None: what borrowing has found); those of a shard in this
        host (own: {shard index: ShardNode}) are added there. idle(seconds): what the I/O
        thread does meanwhile."""
        layout = self.layout
        indices = layout.wire_of[np.asarray(whole, dtype=np.int64)]
        numbers = self.leg_numbers[indices]
        self._add_own(current, indices[numbers < 0], own)
        streams, flights, sent_indices = [], [], []
        planned = self.rates.at(current.number)   # the rates it knows this round at now
        paced = current.stats["generation"]
        current.stats["generation"] = planned.generation if paced is None \
            else min(paced, planned.generation)
        rates = planned.legs.get(self.name, [])
        for number in np.unique(numbers[numbers >= 0]):
            leg, mine = self.legs[number], indices[numbers == number]
            scratch = self.scratch.get(number)
            given, packets = current.packets(mine, self.bit, self.path, scratch)
            sent_indices.append(given)
            self.scratch[number] = getattr(packets, "buffer", None)   # the native path's
            streams.append(((leg.address, leg.port), packets,
                            rates[number].rate_mbps * self.rate_fraction))
            flights.append((number, leg, self.window(leg), current.sent_on_leg.get(number, 0)))

        def window(stream, sent):   # a leg's sums come back once it sent their fragments
            _number, leg, size, before = flights[stream]   # `before`: sent by earlier pieces
            return size - before - sent + int(np.count_nonzero(current.have[leg.first:leg.last]))
        started = perf_counter_at(start_at)
        borrowing = self.borrowing
        if borrowing is not None:
            limits = {destination: mbps * self.rate_fraction
                      for destination, mbps in planned.borrow_limits(self.name).items()}
            floor = sum(rate for _address, _packets, rate in streams)
            borrowing.set_floor(floor, planned.host_floor_mbps(self.name) * self.rate_fraction,
                                limits)
            if rate_factor is not None:
                borrowing.expect(floor * (rate_factor - 1.0))
            else:
                borrowing.hold_to(planned.borrow_cap(self.name))
            borrowing = borrowing if borrowing.active() and streams else None
        borrowed = send_streams(self.sock, streams, idle, SEND_AHEAD_S, started, self.path,
                                window, borrowing, None if borrow_until is None
                                else perf_counter_at(borrow_until))
        for (number, _leg, _size, before), (_address, packets, _rate), given, count in zip(
                flights, streams, sent_indices, borrowed):
            current.sent_on_leg[number] = before + len(packets)
            current.borrowed.update(given[len(given) - count:])
            current.stats["borrowed"] += count
        if self.borrowing is not None:
            self.borrowing.count(sent=sum(borrowed))
        current.sent_first_pass(streams, max(0.0, time.perf_counter() - started), self.path)

    def _add_own(self, current, local, own):
        """Add fragments `local` of round `current` (those no leg carries) to this host's
        own shards (own: {shard index: ShardNode}), without the network; of a gather job,
        those of its own shards alone: the others' sums are their own workers' values."""
        layout = self.layout
        if layout.gather:
            local = local[np.isin(layout.shard_of[local], list(own))]
        for shard in np.unique(layout.shard_of[local]):
            mine = local[layout.shard_of[local] == shard]
            own[shard].add_local(current.number, mine, current.values,
                                 layout.block_of[mine] * layout.per_fragment, self.bit)

    def send_again(self, current, indices):
        """Queue fragments `indices` of round `current` for their legs, at their rates."""
        layout = self.rates.at(current.number)
        lost = current.borrowed.intersection(indices)   # counted once: asked again later,
        current.borrowed -= lost                         # a repair was lost, not a loan
        current.stats["borrowed_lost"] += len(lost)
        if self.borrowing is not None and lost:
            self.borrowing.count(lost=len(lost))
        for index in indices:
            leg = layout.leg_of(self.name, index)
            if leg is not None:
                current.stats["resent"] += 1
                self.outbox.push([(current.number, index)], (leg.address, leg.port),
                                 leg.rate_mbps * self.rate_fraction)

    def take_answers(self, ready):
        """The summing nodes' answers on the socket: a hello's answer adds its address to
        `ready`; a shard's answer to a repair request has what it misses of ours sent
        again; a scatter shard's, which of its fragments are whole, confirms this worker's
        parts of them (Round.confirm)."""
        while True:
            try:
                packet, address = self.sock.recvfrom(65536)
            except BlockingIOError:
                return
            answer = control_message(packet) or {}
            if answer.get("job") != self.layout.id:
                continue
            if answer.get("ready"):
                ready.add(address)
            number, shard = answer.get("round"), answer.get("shard")
            current = self.rounds.get(number) if whole(number) else None
            if current is None or not whole(shard) or address[0] not in self.shard_addresses:
                continue
            if self.layout.scatter:
                current.confirm(shard, address[0], answer.get("whole"))
            missing = missing_pairs(answer.get("missing"), self.layout.count)
            current.replies[shard] = (time.monotonic(), missing)
            self.send_again(current, [index for index, mask in missing if mask & self.bit])

    def _resent_packets(self, items):
        """(the (round, fragment)s still in flight, their datagrams, sent again)."""
        return packets_by_round(items, self._round_packets, self.path)

    def _round_packets(self, number, indices):
        """(the fragments of `indices` given, their datagrams) of round `number` if it is
        still in flight."""
        current = self.rounds.get(number)
        return None if current is None else current.packets(indices, self.bit, self.path)
