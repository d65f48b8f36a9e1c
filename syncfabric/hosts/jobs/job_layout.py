"""A job as its hosts see it, from the controller's answer (POST or GET /jobs): the
shards and their return trees, which fragments each worker sends where, and what each
summing node (a shard's host, an aggregator) expects, from whom."""

from dataclasses import dataclass

import numpy as np

from syncfabric.hosts.packets.control_messages import finite, whole
from syncfabric.hosts.packets.gradient_wire import HEADER, MAX_WORKERS
from syncfabric.hosts.jobs.phase_windows import window_of

MAX_FRAGMENT_BYTES = 65507 - HEADER.size   # a UDP datagram's payload less the fragment header
# a worker borrows at most this much more than the job's least-borrowing worker, for its
# floor: room for that one to rise into without the others holding it down
BORROW_SLACK = 1.25


class JobError(RuntimeError):
    """A job this host cannot take part in as described, or a round that failed."""


@dataclass(frozen=True)
class Shard:
    """One PS shard: its fragments first..last-1, summed in `host`, and its return trees,
    each ((multicast address, its receivers)) at return_mbps: one to every other worker,
    or one to each of them alone (a job whose sums return by unicast)."""
    index: int
    host: str
    address: str
    port: int
    first: int
    last: int
    returns: tuple
    return_mbps: float

    def group_of(self, worker):
        """The address `worker` receives the shard's sums on (None: the shard's host)."""
        return next((group for group, receivers in self.returns if worker in receivers), None)


@dataclass(frozen=True)
class Leg:
    """A worker's fragments first..last-1 of one shard, to `host` (an aggregator or the
    shard's host) at rate_mbps."""
    shard: int
    host: str
    address: str
    port: int
    first: int
    last: int
    rate_mbps: float


@dataclass(frozen=True)
class Aggregation:
    """An aggregator's part: the fragments of `workers` ({worker: (first, last)}) of one
    shard, summed and sent on to the shard's host at rate_mbps."""
    host: str
    shard: int
    port: int
    rate_mbps: float
    workers: dict


class JobLayout:
    def __init__(self, report):
        if report["fragment_bytes"] % 4 or not 4 <= report["fragment_bytes"] <= MAX_FRAGMENT_BYTES:
            raise JobError("the controller cuts fragments of %d bytes: a datagram carries whole "
                           "float32s, at most %d bytes of them" % (report["fragment_bytes"],
                                                                   MAX_FRAGMENT_BYTES))
        if report["model_bytes"] % 4 or report["model_bytes"] <= 0:
            raise JobError("a job's model is float32: model_bytes must be a positive multiple "
                           "of 4")
        fragments = -(-report["model_bytes"] // report["fragment_bytes"])
        if report["fragments"] != fragments:
            raise JobError("job %s: %s fragments of %d bytes cannot carry a model of %d bytes "
                           "(%d do); the controller's answer is not one job's" % (
                               report.get("id"), report["fragments"], report["fragment_bytes"],
                               report["model_bytes"], fragments))
        self.id, self.generation = report["id"], report["generation"]
        self.effective_round = report.get("effective_round", 0)   # its rates hold from it
        self.workers = list(report["workers"])
        if len(self.workers) > MAX_WORKERS:
            raise JobError("at most %d workers (a fragment's worker mask has 64 bits)" % MAX_WORKERS)
        self.bit = {w: 1 << i for i, w in enumerate(self.workers)}
        self.everyone = (1 << len(self.workers)) - 1
        self.floats, self.count = report["model_bytes"] // 4, report["fragments"]
        self.per_fragment = report["fragment_bytes"] // 4   # float32s a fragment carries
        self.addresses = dict(report["addresses"])
        self.shards = [Shard(i, s["host"], s["address"], s["port"], *s["fragments"],
                             tuple((tree["group"], tuple(tree["receivers"]))
                                   for tree in s["return"]["trees"]),
                             s["return"]["rate_mbps"])
                       for i, s in enumerate(report["shards"])]
        self.legs = {w: [Leg(leg["shard"], leg["host"], leg["address"], leg["port"],
                             *leg["fragments"], leg["rate_mbps"]) for leg in legs]
                     for w, legs in report["destinations"].items()}
        self.aggregations = [Aggregation(a["host"], a["shard"], a["port"], a["rate_mbps"],
                                         {w: tuple(f) for w, f in a["workers"].items()})
                             for a in report["aggregators"]]
        self.borrow = borrow_of(report.get("borrow"), self.id)   # (dscp, ceiling) or None
        # under interleaving, what a round sends in all from its window's start, as a
        # multiple of its floors (phase_windows.JobWindow.rate_factor; None: no window)
        window = window_of(report)
        self.window_factor = None if window is None else window.rate_factor
        # {aggregator: Mbit/s} the workers may borrow into it in all (none: no bound)
        self.borrow_into = aggregators_borrowable(report.get("borrow"), self.id)
        # {worker: Mbit/s} each running worker says it borrows: what holds every one's
        # borrowing near the least of them (borrow_cap)
        self.borrowed_by = borrowed_rates(report.get("borrowed_by"), self.id, self.workers)
        # what the controller predicts a round of these rates takes (None: a job saved
        # before reports had it); a round's failure is timed by it (FabricWorker)
        self.predicted_round_s = report.get("predicted_round_s")
        # a gather job's shards hold their own workers' values, summed with no one else's
        self.gather = report.get("gather", False) is True
        # a scatter job's shards keep their sums in their own workers: none return, and
        # each shard tells the other workers when a round of it is whole (job_roles)
        self.scatter = report.get("scatter", False) is True
        check_layout(self)
        self.shard_of = np.zeros(self.count, dtype=np.int64)   # fragment -> its shard
        for shard in self.shards:
            self.shard_of[shard.first:shard.last] = shard.index
        self.wire_of = striped_order(self.ranges(), self.count)   # a worker's block -> fragment
        self.block_of = np.argsort(self.wire_of)                 # and back

    def ranges(self):
        """Every range of fragments (first, last) the job names: its shards', its legs'
        and its aggregated workers'."""
        ranges = [(s.first, s.last) for s in self.shards]
        ranges += [(leg.first, leg.last) for legs in self.legs.values() for leg in legs]
        return ranges + [f for a in self.aggregations for f in a.workers.values()]

    def owed_to(self, worker):
        """By fragment, whether `worker`'s result holds its sum: None for every one, a
        scatter job's: its own shards' alone (their sums stay in their hosts)."""
        if not self.scatter:
            return None
        owed = np.zeros(self.count, dtype=bool)
        for shard in self.shards_of(worker):
            owed[shard.first:shard.last] = True
        return owed

    def shards_of(self, host):
        return [s for s in self.shards if s.host == host]

    def aggregations_of(self, host):
        return [a for a in self.aggregations if a.host == host]

    def serves(self, host):
        """Whether `host` sums anything in this job without being one of its workers."""
        return host not in self.bit and bool(self.shards_of(host) or self.aggregations_of(host))

    def whole_mask(self, shard):
        """The workers a whole sum of `shard` holds: all (a gather job's: its own worker)."""
        return self.bit[shard.host] if self.gather else self.everyone

    def shard_expected(self, shard):
        """Per fragment, the workers a shard's sums must hold (whole_mask), in its range."""
        expected = np.zeros(self.count, dtype=np.uint64)
        expected[shard.first:shard.last] = self.whole_mask(shard)
        return expected

    def shard_senders(self, shard):
        """{address: the workers a datagram from there may carry} for a shard's host."""
        senders = {}
        for worker, legs in self.legs.items():
            if any(leg.shard == shard.index and leg.host == shard.host for leg in legs):
                senders[self.addresses[worker]] = self.bit[worker]
        for aggregation in self.aggregations:
            if aggregation.shard == shard.index:
                address = self.addresses[aggregation.host]
                senders[address] = senders.get(address, 0) | self.mask(aggregation.workers)
        return senders

    def aggregation_expected(self, aggregation):
        expected = np.zeros(self.count, dtype=np.uint64)
        for worker, (first, last) in aggregation.workers.items():
            expected[first:last] |= np.uint64(self.bit[worker])
        return expected

    def aggregation_senders(self, aggregation):
        return {self.addresses[w]: self.bit[w] for w in aggregation.workers}

    def mask(self, workers):
        mask = 0
        for worker in workers:
            mask |= self.bit[worker]
        return mask

    def host_floor_mbps(self, host):
        """What the job's rates send out of `host` in all (its legs as a worker, its
        shards' returns, its aggregates): the floor its senders borrow beyond."""
        floor = self.worker_floor_mbps(host)
        floor += sum(s.return_mbps * len(s.returns) for s in self.shards_of(host))
        return floor + sum(a.rate_mbps for a in self.aggregations_of(host))

    def worker_floor_mbps(self, worker):
        """What `worker`'s legs send at the job's rates, together."""
        return sum(leg.rate_mbps for leg in self.legs.get(worker, ()))

    def borrow_cap(self, worker):
        """What `worker` may borrow at most (Mbit/s, as workers say it): BORROW_SLACK times
        what the worker that borrows least for its floor borrows, for this one's floor;
        None if no worker with a floor said. A fragment's sum waits for every worker's
        part, so what one borrows beyond the others shortens no round, and takes the
        borrowed class from other jobs."""
        floors = {w: self.worker_floor_mbps(w) for w in self.borrowed_by}
        ratios = [mbps / floors[w] for w, mbps in self.borrowed_by.items() if floors[w] > 0]
        if not ratios:
            return None
        return BORROW_SLACK * min(ratios) * self.worker_floor_mbps(worker)

    def borrow_limits(self, worker):
        """{(address, port): Mbit/s} that `worker` may borrow at most toward each of its
        legs into an aggregator: the leg's floor's part of what the workers may borrow
        into it in all (borrow_into), so that together they ask no more of it."""
        into = {host: sum(leg.rate_mbps for legs in self.legs.values() for leg in legs
                          if leg.host == host)
                for host in self.borrow_into}
        limits = {}
        for leg in self.legs.get(worker, ()):
            if into.get(leg.host, 0) > 0:
                destination = (leg.address, leg.port)
                limits[destination] = limits.get(destination, 0.0) + (
                    self.borrow_into[leg.host] * leg.rate_mbps / into[leg.host])
        return limits

    def leg_of(self, worker, fragment):
        """The leg of `worker` that carries `fragment` (None: its own shard's)."""
        return next((leg for leg in self.legs.get(worker, ())
                     if leg.first <= fragment < leg.last), None)

    def leg_numbers(self, worker):
        """Per fragment, the position of the leg of `worker` that carries it in
        legs[worker] (-1: none, its own shard's), for many fragments at once."""
        numbers = np.full(self.count, -1, dtype=np.int64)
        for number, leg in enumerate(self.legs.get(worker, ())):
            numbers[leg.first:leg.last] = number
        return numbers


def check_layout(layout):
    """JobError unless a job's layout, as its report describes it, is one its hosts can
    take part in: every check below."""
    check_ranges(layout)
    check_returns(layout)
    check_gather(layout)
    check_scatter(layout)


def check_ranges(layout):
    """JobError unless every range of fragments (a shard's, a leg's, an aggregated
    worker's) lies within the job's and every shard a leg names exists."""
    for first, last in layout.ranges():
        if not 0 <= first <= last <= layout.count:
            raise JobError("job %s: fragments %s..%s lie outside its %d" % (
                layout.id, first, last, layout.count))
    shards = {leg.shard for legs in layout.legs.values() for leg in legs}
    shards |= {a.shard for a in layout.aggregations}
    if not shards <= set(range(len(layout.shards))):
        raise JobError("job %s names a shard it does not have" % layout.id)


def check_returns(layout):
    """JobError unless every shard's return trees reach each worker but its own host
    once, and no one else: a worker no tree reaches would wait for its sums forever.
    A scatter job's shards have none: their sums stay in their hosts."""
    for shard in layout.shards:
        reached = [w for _group, receivers in shard.returns for w in receivers]
        wanted = [] if layout.scatter else [w for w in layout.workers if w != shard.host]
        if sorted(reached) != sorted(wanted):
            raise JobError("job %s: shard %d's return trees reach %s, not its workers %s"
                           % (layout.id, shard.index, sorted(reached), wanted))


def check_gather(layout):
    """JobError unless a gather job's every shard is in a worker, and no worker sends
    anything to another host: each shard's sums are its own worker's values."""
    if not layout.gather:
        return
    if any(shard.host not in layout.bit for shard in layout.shards) or layout.aggregations \
            or any(layout.legs.values()):
        raise JobError("job %s: a gather job has its shards in its workers and no "
                       "gradients, not %s" % (layout.id, [s.host for s in layout.shards]))


def check_scatter(layout):
    """JobError unless a scatter job, which no gather job is, has one shard in each
    of its workers: each worker's result is its own shard's sums."""
    if not layout.scatter:
        return
    if layout.gather or sorted(s.host for s in layout.shards) != sorted(layout.workers):
        raise JobError("job %s: a scatter job has one shard in each worker and is no "
                       "gather job, not shards in %s" % (layout.id, [s.host for s in layout.shards]))


def borrow_of(borrow, job_id):
    """(DSCP, ceiling Mbit/s) of what a job's report allows its hosts to borrow beyond
    their rates (the controller's `borrow`), or None; JobError if it is not one."""
    if borrow is None:
        return None
    dscp, ceiling = (borrow.get("dscp"), borrow.get("ceiling_mbps")) \
        if isinstance(borrow, dict) else (None, None)
    if not (whole(dscp) and 0 <= dscp < 64 and finite(ceiling) and ceiling > 0):
        raise JobError("job %s: borrow must name a DSCP (0-63) and a positive ceiling_mbps, "
                       "not %r" % (job_id, borrow))
    return dscp, float(ceiling)


def aggregators_borrowable(borrow, job_id):
    """{aggregator: Mbit/s} of a report's `borrow` (its aggregators_mbps; none from a
    controller that does not bound them); JobError unless every one is a host's name
    with a number from 0 up."""
    found = (borrow or {}).get("aggregators_mbps", {}) if isinstance(borrow, dict) else {}
    rates = rates_by_name(found, lambda host: isinstance(host, str))
    if rates is None:
        raise JobError("job %s: borrow's aggregators_mbps must map aggregators to Mbit/s "
                       "from 0 up, not %r" % (job_id, found))
    return rates


def borrowed_rates(said, job_id, workers):
    """{worker: Mbit/s} of a report's `borrowed_by` (none from a controller that does not
    say it); JobError unless every one is a worker of the job's with a number from 0 up."""
    rates = rates_by_name({} if said is None else said, lambda worker: worker in workers)
    if rates is None:
        raise JobError("job %s: borrowed_by must map the job's workers to Mbit/s from 0 up, "
                       "not %r" % (job_id, said))
    return rates


def rates_by_name(found, named):
    """{name: Mbit/s as a float} of `found` if it maps names (`named(name)` true) to
    numbers from 0 up; None if it is not such a map."""
    if not isinstance(found, dict) or not all(
            named(name) and finite(mbps) and mbps >= 0 for name, mbps in found.items()):
        return None
    return {name: float(mbps) for name, mbps in found.items()}


def striped_order(ranges, count):
    """Which fragment carries each block of per_fragment floats of a worker's values:
    the job's fragments cut at every edge of `ranges` (its shards', legs' and aggregated
    workers' (first, last)), the pieces interleaved in proportion to their sizes, so
    that values that come in pieces (DDP's buckets, a call shorter than a round) keep
    every leg busy from the first piece. Cut at shards' edges alone, a third of a round
    whose shards each went over several aggregators took one aggregator's leg of each
    shard, and as long as the whole round. The short last fragment stays last (the last
    of the last piece)."""
    edges = sorted({0, count, *(edge for first_last in ranges for edge in first_last)})
    order = np.arange(count)
    progress = np.zeros(count)
    for first, last in zip(edges, edges[1:]):
        progress[first:last] = (np.arange(last - first) + 1) / (last - first)
    return order[np.lexsort((order, progress))]
