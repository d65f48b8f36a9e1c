"""Hypothesis strategies for what a process may send a job's hosts: fragment datagrams
with every field at its edges (job, round, index, count, mask, length, NaN and Inf),
control messages whole, cut short or malformed, from members and strangers; and
scripted recvmmsg results (lengths, flags, GRO control messages of any size, up to
MOST_SEGMENTS segments and past them) for the native path's cutting rule."""

import json
import struct

import numpy as np
from hypothesis import strategies as st

from syncfabric.hosts.packets.gradient_wire import FLOATS, HEADER, ROUND_MAX

JOB = 7
WORKERS = ("w1", "w2", "w3")
ADDRESSES = {"w1": "10.0.0.11", "w2": "10.0.0.12", "w3": "10.0.0.13", "agg": "10.0.0.21",
             "ps": "10.0.0.31", "stranger": "10.0.0.50"}
PORT = 29000
GATHER_SHARD_HOST = "w1"   # a gather job's one shard: its sums are w1's values alone
SLOT_BYTES = 65536
MSG_TRUNC, MSG_CTRUNC = 0x20, 0x08
SOL_UDP, UDP_GRO = 17, 104
CMSG_HEADER = struct.Struct("@Qii")   # cmsghdr on LP64: cmsg_len, cmsg_level, cmsg_type
ROUND_EDGES = [0, 1, 2, 3, 15, 16, 17, 18, 19, 33, 2 ** 31 - 1, 2 ** 31, ROUND_MAX - 1, ROUND_MAX]


def job_report(per_fragment, floats, aggregated, gather=False):
    """A job of three workers and one shard on "ps" (w1 and w2 through "agg" if
    aggregated), fragments of per_fragment floats, as the controller describes it; or
    `gather`, a gather job's, its one shard in w1 and its sums w1's values alone."""
    count = -(-floats // per_fragment)
    via = "agg" if aggregated else "ps"
    to = {"w1": via, "w2": via, "w3": "ps"}
    host = GATHER_SHARD_HOST if gather else "ps"
    return {"id": JOB, "generation": 1, "workers": list(WORKERS), "model_bytes": floats * 4,
            "fragment_bytes": per_fragment * 4, "fragments": count, "addresses": ADDRESSES,
            "gather": gather,
            "shards": [{"host": host, "address": ADDRESSES[host], "port": PORT,
                        "fragments": [0, count], "bytes": [0, floats * 4],
                        "return": {"port": PORT, "rate_mbps": 100.0, "trees": [
                            {"tree": 1, "group": "239.1.1.1",
                             "receivers": [w for w in WORKERS if w != host]}]}}],
            "destinations": {w: [] if gather else
                             [{"shard": 0, "host": to[w], "address": ADDRESSES[to[w]],
                               "port": PORT, "fragments": [0, count], "rate_mbps": 100.0}]
                             for w in WORKERS},
            "aggregators": [{"host": "agg", "address": ADDRESSES["agg"], "shard": 0, "port": PORT,
                             "rate_mbps": 100.0, "workers": {"w1": [0, count], "w2": [0, count]}}]
            if aggregated else []}


# two shapes: a few fragments with a short last one, and enough for two cores' blocks
LAYOUTS = {"small": (7, 7 * 5 - 3), "two-blocks": (3, 3 * 130 - 1)}

floats32 = st.one_of(st.floats(width=32, allow_nan=True, allow_infinity=True),
                     st.sampled_from([float("nan"), float("inf"), -float("inf"), 0.0, -0.0]))


FAULTS = ("job", "round", "index", "count", "mask", "length", "cut", "extra")


@st.composite
def fragment(draw, per_fragment, floats, bit):
    """A fragment datagram from a sender allowed the workers in `bit`: one a node would
    count (the job, a recent round, a fragment and mask the sender may send, its exact
    length) but for a few faults drawn from FAULTS, each field at an edge or anywhere."""
    faults = draw(st.sets(st.sampled_from(FAULTS), max_size=3))
    count = -(-floats // per_fragment)
    index = draw(st.sampled_from([count, 2 ** 32 - 1]) if "index" in faults
                 else st.integers(0, count - 1))
    fields = (draw(st.sampled_from([JOB + 1, 0, 2 ** 32 - 1])) if "job" in faults else JOB,
              draw(st.one_of(st.sampled_from(ROUND_EDGES), st.integers(0, ROUND_MAX))
                   if "round" in faults else st.integers(0, 3)),
              index,
              draw(st.sampled_from([count + 1, 0, 2 ** 32 - 1])) if "count" in faults else count,
              draw(st.one_of(st.sampled_from([0, 7, 8, 2 ** 64 - 1]), st.integers(0, 2 ** 64 - 1))
                   if "mask" in faults
                   else st.sampled_from([bit] + [m for m in (1, 2, 4, 3) if m & bit == m])))
    carried = max(0, min(per_fragment, floats - min(index, count) * per_fragment))
    length = draw(st.integers(0, per_fragment + 2)) if "length" in faults else carried
    values = draw(st.lists(floats32, min_size=length, max_size=length))
    packet = HEADER.pack(*fields) + np.array(values, dtype=FLOATS).tobytes()
    if "cut" in faults:
        packet = packet[:draw(st.integers(0, HEADER.size + 3))]
    if "extra" in faults:
        packet += draw(st.sampled_from([b"\x00", b"\x00" * 4]))
    return packet


@st.composite
def control(draw):
    """A control message (SFJC and JSON): a hello, a repair request, or nonsense; now
    and then cut short."""
    number = draw(st.one_of(st.sampled_from(ROUND_EDGES + [-1, 2 ** 32, 2 ** 32 + 1, 2 ** 64]),
                            st.sampled_from([True, None, "1", 1.5, [1]])))
    need = draw(st.one_of(st.lists(st.lists(st.integers(-2, 140), min_size=2, max_size=2),
                                   max_size=3),
                          st.sampled_from([[[0, 2 ** 40]], "all", None, [[1]], [[5, 2]]])))
    message = draw(st.sampled_from([
        {"job": JOB, "round": number, "need": need},
        {"job": JOB, "hello": "w1"},
        {"job": JOB + 1, "round": number, "need": need},
        {"job": JOB, "round": number},
        ["not", "a", "dict"],
    ]))
    packet = b"SFJC" + json.dumps(message).encode()
    cut = draw(st.one_of(st.just(None), st.just(None), st.integers(0, len(packet))))
    return packet if cut is None else packet[:cut]


SENDERS = {"w1": 1, "w2": 2, "w3": 4, "agg": 3, "ps": 7, "stranger": 1}
sources = st.sampled_from([ADDRESSES[name] for name in SENDERS])


@st.composite
def datagram(draw, per_fragment, floats, bit=7):
    """Mostly a fragment, now and then a control message or any bytes."""
    kind = draw(st.integers(0, 9))
    if kind < 7:
        return draw(fragment(per_fragment, floats, bit))
    return draw(control() if kind < 9 else st.binary(max_size=40))


@st.composite
def sent(draw, per_fragment, floats):
    """(datagram, (source address, port)) from one of the job's hosts or a stranger."""
    name = draw(st.sampled_from(sorted(SENDERS)))
    return (draw(datagram(per_fragment, floats, SENDERS[name])),
            (ADDRESSES[name], draw(st.integers(0, 65535))))


def batch(per_fragment, floats, most=64):
    """[(datagram, (source address, port))]: what one receive may hand a node."""
    return st.lists(sent(per_fragment, floats), max_size=most)


def batches(per_fragment, floats):
    return st.lists(batch(per_fragment, floats), min_size=1, max_size=4)


def returns(per_fragment, floats, gather=False):
    """Batches a worker's returned sums may get: mostly from the shard's host, mostly
    whole sums (every worker's bit; of a `gather` job's shard, w1's alone, and now and
    then every worker's), now and then from another host."""
    host, other = (GATHER_SHARD_HOST, "w3") if gather else ("ps", "w2")
    source = st.tuples(st.sampled_from([ADDRESSES[host]] * 3 + [ADDRESSES[other]]),
                       st.integers(0, 65535))
    whole = st.sampled_from([SENDERS[GATHER_SHARD_HOST]] * 3 + [7]) if gather else st.just(7)
    return st.lists(st.lists(whole.flatmap(lambda bit: st.tuples(
        datagram(per_fragment, floats, bit), source)), max_size=64), min_size=1, max_size=4)


@st.composite
def gro_control(draw):
    """A receive's control bytes: none, a UDP_GRO message with any int (0 to 2**31-1,
    and negative), one of another level, one whose length lies, or one cut short."""
    size = draw(st.one_of(st.integers(1, 200), st.integers(-2 ** 31, 2 ** 31 - 1),
                          st.sampled_from([0, 1, 7, 24, 2 ** 31 - 1])))
    whole = CMSG_HEADER.pack(CMSG_HEADER.size + 4, SOL_UDP, UDP_GRO) + struct.pack("@i", size)
    padded = whole + b"\x00" * 4
    kind = draw(st.sampled_from(["none", "gro", "gro", "gro", "other", "liar", "short"]))
    if kind == "none":
        return b""
    if kind == "other":
        return CMSG_HEADER.pack(CMSG_HEADER.size + 4, 0, 8) + struct.pack("@i", size) + b"\x00" * 4
    if kind == "liar":
        return CMSG_HEADER.pack(draw(st.sampled_from([0, 8, 15, 17, 64, 2 ** 63])),
                                SOL_UDP, UDP_GRO) + struct.pack("@i", size) + b"\x00" * 4
    if kind == "short":
        return whole[:draw(st.integers(0, len(whole) - 1))]
    return padded


@st.composite
def message(draw, payloads):
    """One scripted recvmmsg result: (msg_len, msg_flags, control, source, port), and the
    bytes of its slot: a run of datagrams (as GRO hands them) or any bytes."""
    run = draw(st.lists(payloads, min_size=1, max_size=4))
    data = b"".join(run)[:SLOT_BYTES]
    size = draw(st.one_of(st.just(len(data)), st.just(len(data)),
                          st.sampled_from([0, SLOT_BYTES, SLOT_BYTES + 1, 2 ** 31 - 1]),
                          st.integers(0, 2 ** 32 - 1)))
    flags = draw(st.sampled_from([0, 0, 0, MSG_TRUNC, MSG_CTRUNC, MSG_TRUNC | MSG_CTRUNC]))
    control_bytes = draw(gro_control())
    if draw(st.booleans()) and run and len(run[0]):   # GRO as the kernel makes it
        control_bytes = (CMSG_HEADER.pack(CMSG_HEADER.size + 4, SOL_UDP, UDP_GRO)
                         + struct.pack("@i", len(run[0])) + b"\x00" * 4)
    source = draw(sources)
    return (size, flags, control_bytes, source, draw(st.integers(0, 65535))), data


def scripted(per_fragment, floats):
    """Up to 8 scripted recvmmsg results (a receive's slots)."""
    return st.lists(message(datagram(per_fragment, floats)), min_size=1, max_size=8)
