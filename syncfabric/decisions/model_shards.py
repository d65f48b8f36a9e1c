"""A model cut into fragments (one datagram's payload each) and the fragments shared out
among PS shards: what the controller tells a job, and what its hosts send and sum.

The host side frames fragments (syncfabric/hosts/packets/gradient_wire.py); these sizes are the
contract between the two, and a test holds them equal.
"""

FRAGMENT_HEADER_BYTES = 24          # job, round, fragment, fragment count, worker mask
FRAGMENT_WIRE_OVERHEAD_BYTES = 14 + 20 + 8 + FRAGMENT_HEADER_BYTES   # Ethernet, IP, UDP, ours
DEFAULT_MTU = 1500
MIN_MTU, MAX_MTU = 576, 9000
SPAN_TOLERANCE = 1e-9   # of a shard's range: shares that add to 1 up to float rounding


def fragment_payload_bytes(mtu=DEFAULT_MTU):
    """The float32 bytes one fragment carries: a datagram that fills `mtu` (IP and UDP
    headers and the fragment header taken off), in whole floats."""
    return (mtu - 20 - 8 - FRAGMENT_HEADER_BYTES) // 4 * 4


FRAGMENT_PAYLOAD_BYTES = fragment_payload_bytes()   # 1448, at a 1500-byte MTU


def fragment_count(model_bytes, fragment_bytes=FRAGMENT_PAYLOAD_BYTES):
    return -(-model_bytes // fragment_bytes)


def even_fragment_bytes(model_bytes, shards, mtu=DEFAULT_MTU):
    """The payload of the fragments of a model cut for `shards` equal shards: at most a
    datagram that fills `mtu`, and no smaller than it takes for every shard to hold as
    many fragments as the others. The streams to equal shards have equal rates, so a
    shard with one fragment more ends last: 20 fragments against 19 made every round of
    a 1.2 MB model over 7 shards 4% longer."""
    fragments = -(-fragment_count(model_bytes, fragment_payload_bytes(mtu)) // shards) * shards
    return -(-model_bytes // (4 * fragments)) * 4


def wire_mbit(model_bytes, fragment_bytes=FRAGMENT_PAYLOAD_BYTES):
    """Megabits a model of `model_bytes` takes on a link, headers included."""
    return (model_bytes + fragment_count(model_bytes, fragment_bytes)
            * FRAGMENT_WIRE_OVERHEAD_BYTES) * 8 / 1e6


def fragment_ranges(split, count):
    """{PS: (first, last)}: the fragments each PS holds, contiguous, in proportion to its
    share of the model (every PS at least one)."""
    bounds, cumulative = [0], 0.0
    for share in list(split.values())[:-1]:
        cumulative += share
        bounds.append(min(count - (len(split) - len(bounds)), max(bounds[-1] + 1,
                                                                  round(cumulative * count))))
    bounds.append(count)
    return {ps: (bounds[i], bounds[i + 1]) for i, ps in enumerate(split)}


def aggregator_offsets(shares):
    """{(ps, aggregator): where its span starts in shard ps's range [0, 1)}, from
    {(worker, ps): [(node, share)]}: a shard's aggregators by name, each after the widest
    share any worker sends the one before it. Every worker starts an aggregator's span
    there, so its inputs nest and it sends no more than its fastest input, as the
    placement LP rates it. A shard whose widest shares add to more than the whole range
    gets no offsets (share_spans then lays shares end to end)."""
    widest = {}
    for (_worker, ps), legs in shares.items():
        of_shard = widest.setdefault(ps, {})
        for node, share in legs:
            if node != ps:
                of_shard[node] = max(of_shard.get(node, 0.0), share)
    offsets = {}
    for ps, by_node in widest.items():
        if sum(by_node.values()) > 1 + SPAN_TOLERANCE:
            continue
        start = 0.0
        for node in sorted(by_node):
            offsets[ps, node] = start
            start += by_node[node]
    return offsets


def leg_shares(plan_workers):
    """{(worker, shard host): [(node, share)]} from the INA plan's legs by worker."""
    shares = {}
    for worker, legs in plan_workers.items():
        for leg in legs:
            shares.setdefault((worker, leg["ps"]), []).append((leg["node"], leg["share"]))
    return shares


def share_spans(shares, ps, offsets):
    """[(node, start, end)] in order: one worker's split of shard ps's range [0, 1) from
    [(node, share)] (none for its own shard), each aggregator's span at its offset
    (aggregator_offsets) and ps's own host in the gaps. Without offsets for them, the
    shares lie end to end, the aggregators by name and then ps, the same order for
    every worker."""
    if not shares:   # a worker's own shard, in its host
        return []
    sent = [(node, share) for node, share in shares if node != ps and share > 0]
    if not all((ps, node) in offsets for node, _share in sent):
        spans, start = [], 0.0
        for node, share in sorted(shares, key=lambda item: (item[0] == ps, item[0])):
            spans.append((node, start, start + share))
            start += share
        return spans
    spans = sorted((offsets[ps, node], offsets[ps, node] + share, node) for node, share in sent)
    gaps, reached = [], 0.0
    for start, end, _node in spans + [(1.0, 1.0, None)]:
        if start > reached + SPAN_TOLERANCE:
            gaps.append((reached, start, ps))
        reached = max(reached, end)
    return [(node, start, end) for start, end, node in sorted(spans + gaps)]


def spans_nest(spans, tolerance=SPAN_TOLERANCE):
    """Whether [(start, end)] all lie within the longest: an aggregate that gets them
    then carries no more fragments than its fastest input."""
    first, last = max(spans, key=lambda span: span[1] - span[0])
    return all(first - tolerance <= start and end <= last + tolerance for start, end in spans)


def worker_legs(plan_legs, pss, held, offsets):
    """A worker's destinations: per shard, the fragments of its range that go to each of
    its aggregators and to the shard's host, as share_spans lays them out, each at its
    leg's rate (in proportion, where the shard's host has several gaps)."""
    legs = []
    for index, ps in enumerate(pss):
        mine = {leg["node"]: leg for leg in plan_legs if leg["ps"] == ps}
        first, end = held[ps]

        def fragment_at(position):
            return end if position >= 1 - SPAN_TOLERANCE else first + round(position * (end - first))

        spans = share_spans([(node, leg["share"]) for node, leg in mine.items()], ps, offsets)
        for node, start, stop in spans:
            low, high = fragment_at(start), fragment_at(stop)
            if high > low:
                leg = mine[node]
                legs.append({"shard": index, "host": node, "fragments": [low, high],
                             "rate_mbps": leg["rate_mbps"] * (stop - start) / leg["share"]})
    return legs


def destinations(plan_workers, workers, pss, held):
    """{worker: worker_legs}: every worker's destinations from the INA plan's legs by
    worker, laid out at the offsets of the whole plan's shares."""
    offsets = aggregator_offsets(leg_shares(plan_workers))
    return {w: worker_legs(plan_workers[w], pss, held, offsets) for w in workers}
