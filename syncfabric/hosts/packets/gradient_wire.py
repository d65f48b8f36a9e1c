"""Gradients on the wire: seeded float32 gradients, their fragments (a header of job,
round, fragment id, fragment count and the 64-bit mask of the workers a fragment
carries, in network order; then little-endian float32s), the sums a receiver keeps,
and the exact-sum check (float64 from the same seeds, within the float32 summation bound
n * 2**-24 * sum_i |g_i| plus one rounding of the result)."""

import struct

import numpy as np

from syncfabric.hosts.packets.wire import FRAME_OVERHEAD, chunk_payload_bytes

HEADER = struct.Struct("!IIIIQ")        # job, round, fragment, fragment count, worker mask
# the floats after it: little-endian, the order of the hosts we run on (x86-64, arm64),
# so they are summed where they lie and sent from the caller's array (docs/datapath.md)
FLOATS = np.dtype("<f4")
MAX_WORKERS = 64
ROUND_MAX = 2 ** 32 - 1                 # a round number's 32 bits on the wire (HEADER)


def floats_per_fragment():
    """The floats one fragment carries: a datagram that fills the data-plane MTU (362 at
    1500, as the controller's model_shards.fragment_payload_bytes says)."""
    return (chunk_payload_bytes() - HEADER.size) // 4


def gradient_floats(gradient_mb):
    return int(gradient_mb * 1e6) // 4


def fragment_count(floats, per_fragment=None):
    return -(-floats // (per_fragment or floats_per_fragment()))


def carries_fragment(packet, floats, per_fragment, index):
    """Whether `packet` carries exactly fragment `index` of `floats` (per_fragment a
    fragment, fewer in the last): a longer one would spill into the next fragment's
    place, a shorter one leave a hole counted as summed."""
    return 0 <= index < fragment_count(floats, per_fragment) and \
        len(packet) - HEADER.size == 4 * min(per_fragment, floats - index * per_fragment)


def wire_mbit(floats):
    """Megabits a gradient of `floats` float32 takes on a link, headers included."""
    return (floats * 4 + fragment_count(floats) * (FRAME_OVERHEAD + HEADER.size)) * 8 / 1e6


def fragment_packet(job, number, index, mask, values, per_fragment=None):
    """Fragment `index` of float32 `values` (per_fragment of them a fragment; by default
    as many as fill the MTU) as a datagram carrying the workers in `mask`."""
    per_fragment = per_fragment or floats_per_fragment()
    start = index * per_fragment
    return HEADER.pack(job, number, index, fragment_count(len(values), per_fragment), mask) + \
        values[start:start + per_fragment].astype(FLOATS).tobytes()


class HeldFragments:
    """The fragments a node sums (`indices`, in order) and where each one's sums lie in
    its array: the i-th held fragment in slot i (slot[index]: -1 for one not held), so
    the array holds only these, however they are spread (a core's blocks: core_split).
    `floats`: the array's floats that carry sums (the job's last fragment may be short)."""

    def __init__(self, indices, count, per_fragment, floats):
        self.indices = np.asarray(indices, dtype=np.int64)
        self.slot = np.full(count, -1, dtype=np.int64)
        self.slot[self.indices] = np.arange(len(self.indices))
        self.size = len(self.indices) * per_fragment
        self.floats = self.size if not len(self.indices) else \
            self.size - per_fragment + min(per_fragment, floats - int(self.indices[-1]) * per_fragment)


class FragmentSums:
    """Per fragment held (HeldFragments; every fragment by default): the running float32
    sum and the mask of workers in it. A node holds only its own fragments' sums.
    A fragment's first datagram is copied in, not added: `sums` may be an older round's
    array, used again without clearing it (a fresh one costs its pages' clearing)."""

    def __init__(self, job, number, floats, expected, per_fragment=None, held=None, sums=None):
        per_fragment = per_fragment or floats_per_fragment()
        self.job, self.number, self.floats, self.per_fragment = job, number, floats, per_fragment
        self.count = fragment_count(floats, per_fragment)
        self.held = held or HeldFragments(np.arange(self.count), self.count, per_fragment, floats)
        size = self.held.size
        self.sums = np.zeros(size, dtype=np.float32) if sums is None else sums
        if len(self.sums) != size:
            raise ValueError("sums for %d floats, not %d" % (len(self.sums), size))
        self.have = np.zeros(self.count, dtype=np.uint64)
        self.expected = np.asarray(expected, dtype=np.uint64)   # mask per fragment
        self.received_bytes = 0

    def fits(self, index, packet):
        """Whether `packet` carries exactly fragment `index` (carries_fragment)."""
        return carries_fragment(packet, self.floats, self.per_fragment, index)

    def add(self, packet):
        """Add one datagram; returns its fragment if that fragment just became complete
        (None also for a datagram of another round or of the wrong length)."""
        job, number, index, _count, mask = HEADER.unpack_from(packet)
        if job != self.job or number != self.number or not self.fits(index, packet):
            return None
        self.received_bytes += len(packet) + FRAME_OVERHEAD
        values = np.frombuffer(packet, dtype=FLOATS, offset=HEADER.size)
        return self.add_values(index, mask, values)

    def add_values(self, index, mask, values):
        """Add fragment `index`'s float32 `values` from the workers in `mask` (a datagram's,
        or this host's own worker's without the network); returns the fragment if it just
        became complete."""
        have = int(self.have[index])
        if mask & have or mask & ~int(self.expected[index]) or self.held.slot[index] < 0:
            return None   # a worker already counted (late or repeated copy), or not ours
        start = self.start_of(index)
        if have:
            self.sums[start:start + len(values)] += values
        else:
            self.sums[start:start + len(values)] = values
        self.have[index] = have | mask
        return index if have | mask == int(self.expected[index]) else None

    def start_of(self, index):
        """Where fragment `index`'s sums begin in `sums` (an array of indices too)."""
        return self.held.slot[index] * self.per_fragment

    def values_of(self, index):
        """Fragment `index`'s sums."""
        start = self.start_of(index)
        return self.sums[start:start + min(self.per_fragment, self.floats - index * self.per_fragment)]

    def missing(self):
        """[[fragment, mask of workers missing], ...]."""
        short = np.flatnonzero(self.have != self.expected)
        return [[int(i), int(self.expected[i]) & ~int(self.have[i])] for i in short]

    def total(self):
        """The sums of the fragments held, in order (all of them: the model's sum)."""
        return self.sums[:self.held.floats]
