"""The summing nodes of a job's rounds, the same in a daemon and in a worker's own host:
a shard's host sums its fragments and returns each sum on its tree as soon as it holds
every worker; an aggregator sums its workers' fragments and sends each aggregate on to
the shard's host at once.

Nothing coordinates a round: a worker that misses returned fragments asks their shard
(a repair request, a small JSON control datagram to the shard's port); the shard sends
again the sums it holds and answers, for the others, which workers it still misses;
each worker sends again what it finds missing of its own. A repeat that reaches an
aggregator which already sent that fragment's aggregate makes it send it again. Before
its first round, a worker says hello to every node it sends to, which answers "ready"
(wait_until_served): the daemons serve the job, and the path and the neighbours'
addresses are known before any fragment leaves.

A datagram counts only if its job is this job, its sender may carry the workers it
names (the job's layout: a worker only itself, an aggregator only its workers), and its
round is one still kept (the KEPT_ROUNDS newest, fewer for a large shard: KEPT_BYTES),
or a new one within the window of rounds (round_window: at most KEPT_ROUNDS past the
newest): fragments from a host outside the job never change a sum, and no datagram
makes a node forget the rounds in flight for a round far ahead.

A daemon may run a node on several cores (core_split): then one node object per core
sums that core's share, and passes on what reaches it of another's (a fragment, or a
repair request, which each core answers for its own fragments).
"""

import logging
import socket
import time
from collections import OrderedDict
from itertools import groupby

import numpy as np

from syncfabric.hosts.packets.control_messages import (control_message, control_packet, needed_fragments,
                                              whole)
from syncfabric.hosts.jobs.core_split import WHOLE, core_expected, core_of
from syncfabric.hosts.datapath import datapath
from syncfabric.hosts.packets.gradient_wire import HEADER, FragmentSums, HeldFragments
from syncfabric.hosts.jobs.job_layout import JobError
from syncfabric.hosts.transport.borrowing import Borrowing
from syncfabric.hosts.transport.paced_sender import PacedSender, packets_by_round
from syncfabric.hosts.transport.pacing import CONFIRM
from syncfabric.hosts.jobs.rate_following import RateSchedule
from syncfabric.hosts.jobs.round_window import RoundWindow
from syncfabric.hosts.jobs.warm_arrays import touched_floats
from syncfabric.hosts.packets.wire import ranges

LOG = logging.getLogger("syncfabric.hosts")
KEPT_ROUNDS = 16   # a summing node keeps this many rounds of a job (rounds in flight at once),
KEPT_BYTES = 128 * 2 ** 20   # or as many as fit in this many bytes of sums (arrays used again),
FEWEST_KEPT_ROUNDS = 4       # but never fewer
HELLO_S = 0.05     # a worker waiting for its summing nodes says hello this often


class SummingNode:
    """One summing node of a job, on one socket: its newest rounds' sums (`kept` of them), and
    `sums_out`, which sends them on paced (a meter at the stream's rate polices the leg).
    Its datagrams come through the host's data path (datapath/): batches, summed there
    where it can, the rest by this node's own rule (datagram). share: the core's share
    of the fragments it sums (core_split.CoreShare; all of them by default). rates: the
    job's layouts by round (rate_following.RateSchedule), whose rates it sends at."""

    def __init__(self, layout, sock, expected, senders, path=None, share=WHOLE, rates=None):
        self.layout, self.sock, self.path, self.share = layout, sock, path or datapath(), share
        self.rates = rates or RateSchedule(layout)
        if share.cores > 1:
            expected = core_expected(expected, share.core, share.cores)
        self.expected, self.senders = expected, senders   # per fragment; {address: mask}
        # the senders as the native data path reads them: IPv4 addresses and their masks
        self.sender_addresses = np.array([int.from_bytes(socket.inet_aton(a), "big")
                                          for a in senders], dtype=np.uint32)
        self.sender_masks = np.array(list(senders.values()), dtype=np.uint64)
        # the fragments this node sums: only their sums are held
        self.held = HeldFragments(np.flatnonzero(self.expected), layout.count,
                                  layout.per_fragment, layout.floats)
        self.rounds = OrderedDict()   # round -> FragmentSums of those fragments
        round_bytes = 4 * self.held.size * share.cores   # the part's: its cores share KEPT_BYTES
        self.kept = max(FEWEST_KEPT_ROUNDS, min(KEPT_ROUNDS, KEPT_BYTES // max(1, round_bytes)))
        self.window = RoundWindow(self.kept, KEPT_ROUNDS)
        # the arrays of the rounds it will keep, made now (warm_arrays); a round forgotten
        # gives its array to the next
        self.spare_sums = [touched_floats(self.held.size) for _round in range(self.kept)]
        self.taken = 0                # datagrams taken from the socket
        self.dropped = 0              # datagrams not counted: not ours, or too old
        self.out_of_window = 0        # of those, naming a round outside the window
        self.truncated = 0            # dropped by the data path: cut short (see NativeBatch)
        self.oversized = 0            # dropped by the data path: more segments than it holds
        # beyond its rates, in the borrowed class, if the job allows it (transport/borrowing)
        self.sums_out = PacedSender(sock, self._sum_packets,
                                    HEADER.size + 4 * layout.per_fragment, self.path,
                                    Borrowing.of(sock, layout.borrow))
        self.expected_round = 0   # the latest round whose sums borrowed the window's rate
        self.greeted = {}         # data address -> (address, port) of each worker's hello

    def _borrow_beyond(self, floor_mbps, layout, host, number):
        """Tell the sums' borrowing, if the job allows it, their floor now (rates move as
        jobs come and go) and their host's, in `layout` (round `number`'s); under
        interleaving, the round's first sums borrow what takes them to the job's rate
        alone (its workers' rounds start in the job's window), a loss halving it still."""
        borrowing = self.sums_out.borrowing
        if borrowing is None:
            return
        borrowing.set_floor(floor_mbps, layout.host_floor_mbps(host))
        if layout.window_factor is not None and number > self.expected_round:
            self.expected_round = number
            borrowing.expect(floor_mbps * (layout.window_factor - 1.0))

    def _sum_packets(self, items):
        """(the (round, fragment)s still kept, the datagrams of their sums)."""
        return packets_by_round(items, self._round_sum_packets, self.path)

    def _round_sum_packets(self, number, indices):
        """(indices, the datagrams of their sums) of round `number`; None once forgotten."""
        sums, layout = self.rounds.get(number), self.layout
        if sums is None:
            return None
        indices = np.array(indices, dtype=np.int64)
        return indices.tolist(), self.path.fragments(
            layout.id, number, layout.count, indices, sums.have[indices], sums.sums,
            sums.start_of(indices), layout.per_fragment, len(sums.total()))

    def sums(self, number):
        """The round's sums (made on its first datagram, in a spare array or that of the
        round it makes the node forget); None for a round too old or outside the window
        (counted)."""
        if whole(number) and number in self.rounds:
            return self.rounds[number]
        if not self.window.admits(number):
            self.out_of_window += 1
            return None
        if len(self.rounds) >= self.kept:   # full: the oldest makes room, or this is older
            if number < next(iter(self.rounds)):
                return None
            spare = self.rounds.popitem(last=False)[1].sums
        else:
            spare = self.spare_sums.pop()
        self.rounds[number] = FragmentSums(self.layout.id, number, self.layout.floats, self.expected,
                                           self.layout.per_fragment, self.held, spare)
        self.rounds = OrderedDict(sorted(self.rounds.items()))
        self.window.begin(number)
        return self.rounds[number]

    def take(self):
        """Take the datagrams waiting on the node's socket, a batch at a time until one
        finds it empty; how many."""
        taken = 0
        while True:
            batch = self.path.receive(self.sock)
            taken += batch.count
            self.absorb(batch)
            if not batch.filled:   # it found the socket empty: the selector says when not
                return taken

    def absorb(self, batch):
        """Every datagram of a received batch: summed by the data path where it can, the
        rest by this node's own rule (datagram), in order."""
        self.taken += batch.count
        self.truncated += batch.truncated
        self.oversized += batch.oversized
        first = 0
        while first < batch.count:
            summed = self.path.sum_fragments(batch, self, first)
            self.dropped += summed.dropped
            self.out_of_window += summed.out_of_window
            for number, run in groupby(summed.completed, key=lambda pair: pair[0]):
                self.completed_all(number, [index for _number, index in run])
            for number, index in summed.repeated:
                self.repeated(number, index)
            if summed.stop < batch.count:   # the data path left it to this node
                self.datagram(batch.packet(summed.stop), batch.source(summed.stop))
            first = summed.stop + 1

    def datagram(self, packet, source):
        """One datagram from `source` (address, port): a fragment or a control message."""
        address = source[0]
        message = control_message(packet)
        if message is None:
            self.fragment(packet, source)
        elif message.get("job") == self.layout.id and address in self.layout.addresses.values():
            self.control(message, source)
            self.share_control(message, packet, source)
        else:
            self.dropped += 1

    def fragment(self, packet, source):
        if len(packet) < HEADER.size:
            self.dropped += 1
            return
        job, number, index, count, mask = HEADER.unpack_from(packet)
        allowed = self.senders.get(source[0], 0)
        ours = job == self.layout.id and count == self.layout.count and index < count \
            and mask and not mask & ~allowed
        if ours and not self.expected[index]:   # not summed here: its core's, or no node's
            self._hand_off(core_of(index, self.share.cores), packet, source)
            return
        sums = self.sums(number) if ours else None
        if sums is None or not sums.fits(index, packet):
            self.dropped += 1
            return
        if int(sums.have[index]) == int(sums.expected[index]):
            self.repeated(number, index)
            return
        complete = sums.add(packet)
        if complete is not None:
            self.completed(number, complete)

    def _hand_off(self, core, packet, source):
        if core == self.share.core or self.share.handoff is None:
            self.dropped += 1
        else:
            self.share.handoff(core, packet, source)

    def share_control(self, message, packet, source):
        """Core 0 passes a repair request on to the node's other cores (the kernel
        steers every control message to core 0), which answer for their own fragments."""
        if self.share.core == 0 and "need" in message:
            for core in range(1, self.share.cores):
                self._hand_off(core, packet, source)

    def add_local(self, number, indices, values, starts, mask):
        """Fragments `indices` of this host's own worker (`mask`), values[starts[i]:] each,
        added without the network; none if the node no longer keeps round `number` (the
        other workers' rounds are past it: sums() counted it), which then fails as a
        round whose sums never come back."""
        sums, per_fragment, floats = self.sums(number), self.layout.per_fragment, self.layout.floats
        if sums is None:
            return
        for index, start in zip(indices.tolist(), starts.tolist()):
            complete = sums.add_values(index, mask, values[start:min(start + per_fragment, floats)])
            if complete is not None:
                self.completed(number, complete)

    def completed(self, number, index):
        self.completed_all(number, [index])

    def completed_all(self, number, indices):
        """Fragments `indices` of round `number` hold every worker now: a batch's, queued
        in one call (a 64 MB round completes thousands of fragments)."""
        raise NotImplementedError

    def repeated(self, number, index):
        """A worker sent again a fragment this node already completed."""

    def control(self, message, address):
        """A worker's hello (answered "ready"); nothing else is asked of every node."""
        if "hello" not in message:
            self.dropped += 1
            return
        self.greeted[address[0]] = address   # the worker's socket, which answers go to
        self.sock.sendto(control_packet({"job": self.layout.id, "ready": True}), CONFIRM, address)


class ShardNode(SummingNode):
    """A shard's host: returns each fragment's sum on the shard's return trees (paced at
    their rate) as soon as it is complete, and answers repair requests (the sums asked
    for go back on the asker's tree). on_sum(round, index,
    values): a worker in this host takes its own shard's sums without the network.
    A scatter job's shard returns nothing: it tells the other workers which fragments
    of a round are whole, so that they know their parts arrived: all of them once the
    round is (confirm_whole), and those a repair request asks for in its answer."""

    def __init__(self, layout, shard, sock, on_sum=None, path=None, share=WHOLE, rates=None):
        super().__init__(layout, sock, layout.shard_expected(shard), layout.shard_senders(shard),
                         path, share, rates)
        self.shard, self.on_sum = shard, on_sum
        self.worker_at = {layout.addresses[w]: w for w in layout.workers}   # repairs' askers
        self.summed = {}   # round -> its fragments whole here (a scatter job's shard)
        self.to_sum = int(np.count_nonzero(self.expected))

    def _return(self, items, worker=None):
        """Queue (round, fragment) sums of one round for the shard's return trees (only
        the one `worker` receives on, if named: a repair), at this core's share of their
        rate in that round."""
        if items and self.shard.returns:
            layout = self.rates.at(items[0][0])
            shard = layout.shards[self.shard.index]
            groups = [group for group, receivers in self.shard.returns
                      if worker is None or worker in receivers]
            rate_mbps = shard.return_mbps / self.share.cores
            self._borrow_beyond(rate_mbps * len(self.shard.returns), layout, self.shard.host,
                                items[0][0])
            self.sums_out.push_copies(items, [(group, self.shard.port) for group in groups],
                                      rate_mbps, repair=worker is not None)

    def completed_all(self, number, indices):
        self._return([(number, index) for index in indices])
        if self.on_sum is not None:
            for index in indices:
                self.on_sum(number, index, self.rounds[number])
        if self.layout.scatter:
            self.summed = {n: count for n, count in self.summed.items() if n in self.rounds}
            self.summed[number] = self.summed.get(number, 0) + len(indices)
            if self.summed[number] == self.to_sum:
                self.confirm_whole(number)

    def confirm_whole(self, number):
        """Tell every other worker that said hello that round `number` of this scatter
        shard is whole: {"job", "round", "shard", "missing": [], "whole": [[first,
        last]]}, as a repair request's answer says it. One lost is asked for again."""
        packet = control_packet({"job": self.layout.id, "round": number,
                                 "shard": self.shard.index, "missing": [],
                                 "whole": [[self.shard.first, self.shard.last]]})
        for worker in self.layout.workers:
            address = self.greeted.get(self.layout.addresses[worker])
            if worker != self.shard.host and address is not None:
                self.sock.sendto(packet, CONFIRM, address)

    def control(self, message, address):
        """A worker's hello, or its repair request: {"job", "round", "need": fragment
        ranges}."""
        if "hello" in message:
            super().control(message, address)
            return
        sums = self.sums(message.get("round"))
        if sums is None:
            self.dropped += 1
            return
        number = sums.number
        need = [i for i in needed_fragments(message.get("need"), self.shard.first,
                                            self.shard.last) if self.expected[i]]
        complete = [i for i in need if int(sums.have[i]) == int(sums.expected[i])]
        self._return([(number, i) for i in complete], self.worker_at.get(address[0]))
        missing = [[i, int(sums.expected[i]) & ~int(sums.have[i])] for i in need
                   if int(sums.have[i]) != int(sums.expected[i])]
        answer = {"job": self.layout.id, "round": number, "shard": self.shard.index,
                  "missing": missing}
        if self.layout.scatter:   # the fragments asked for that are whole: its parts are in
            answer["whole"] = ranges(complete)
        self.sock.sendto(control_packet(answer), CONFIRM, address)


class AggregatorNode(SummingNode):
    """An aggregator: sends each complete aggregate on to the shard's host, paced at the
    aggregation's rate, and again whenever one of its workers repeats a fragment of it
    (once, however many repeat it before it leaves). Sent at once, a backlog summed
    after a stall left in a burst that the leg's meter cut, and every worker's repeat
    sent the aggregate again: at 16 workers, 10-30x the first pass in repairs."""

    def __init__(self, layout, aggregation, sock, path=None, share=WHOLE, rates=None):
        super().__init__(layout, sock, layout.aggregation_expected(aggregation),
                         layout.aggregation_senders(aggregation), path, share, rates)
        shard = layout.shards[aggregation.shard]
        self.destination = (shard.address, shard.port)
        self.position = layout.aggregations.index(aggregation)

    def completed_all(self, number, indices, repair=False):
        """Queue aggregates, at this core's share of the aggregation's rate in their round
        (a repair: only in the guaranteed class)."""
        layout = self.rates.at(number)
        aggregation = layout.aggregations[self.position]
        rate_mbps = aggregation.rate_mbps / self.share.cores
        self._borrow_beyond(rate_mbps, layout, aggregation.host, number)
        self.sums_out.push([(number, index) for index in indices], self.destination, rate_mbps,
                           repair)

    def repeated(self, number, index):
        """A worker's repeat: its aggregate was lost on the way to the shard; again, as a
        repair."""
        self.completed_all(number, [index], repair=True)


def wait_until_served(worker, timeout_s):
    """Say hello to every summing node `worker` (a FabricWorker) sends fragments or
    repair requests to, every HELLO_S, until each answered "ready" (its I/O thread
    files the answers in worker.ready); JobError naming the hosts still silent after
    timeout_s."""
    layout, name = worker.layout, worker.name
    nodes = {(leg.address, leg.port): leg.host for leg in layout.legs.get(name, [])}
    nodes.update({(s.address, s.port): "%s (shard %d's host)" % (s.host, s.index)
                  for s in layout.shards if s.host != name})
    hello = control_packet({"job": layout.id, "hello": name})
    deadline = time.monotonic() + timeout_s
    while set(nodes) - worker.ready:
        if time.monotonic() > deadline:
            silent = sorted({nodes[node] for node in set(nodes) - worker.ready})
            raise JobError("job %d: %s did not answer for %g s; is the aggregator daemon "
                           "(python -m syncfabric.aggregator) running there?"
                           % (layout.id, ", ".join(silent), timeout_s))
        for node in set(nodes) - worker.ready:
            worker.sock.sendto(hello, node)
        time.sleep(HELLO_S)


def missing_ranges(have, first, last):
    """[[first, last), ...] of the fragments in first..last-1 that `have` (bools) lacks."""
    return ranges([i for i in range(first, last) if not have[i]])
