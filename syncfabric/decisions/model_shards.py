"""A model cut into fragments (one datagram's payload each) and the fragments shared out
among PS shards: what the controller tells a job, and what its hosts send and sum.

The host side frames fragments (syncfabric/hosts/gradient_wire.py); these sizes are the
contract between the two, and a test holds them equal.
"""

FRAGMENT_HEADER_BYTES = 24          # job, round, fragment, fragment count, worker mask
FRAGMENT_WIRE_OVERHEAD_BYTES = 14 + 20 + 8 + FRAGMENT_HEADER_BYTES   # Ethernet, IP, UDP, ours
DEFAULT_MTU = 1500
MIN_MTU, MAX_MTU = 576, 9000


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


def worker_legs(plan_legs, pss, held):
    """A worker's destinations: per shard, the fragments of its range that go to its
    aggregator first (their share), the rest to the shard's host, each at its rate."""
    legs = []
    for index, ps in enumerate(pss):
        mine = sorted((leg for leg in plan_legs if leg["ps"] == ps), key=lambda leg: leg["node"] == ps)
        first, end = held[ps]
        for position, leg in enumerate(mine):
            last = end if position == len(mine) - 1 else min(end, first + round(leg["share"] * (end - first)))
            if last > first:
                legs.append({"shard": index, "host": leg["node"], "fragments": [first, last],
                             "rate_mbps": leg["rate_mbps"]})
            first = last
    return legs
