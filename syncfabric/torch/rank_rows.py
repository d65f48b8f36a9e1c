"""The rounds of a group's gather job and of its scatter job (gather_rounds.py,
scatter_rounds.py) as rows of one fragment a rank: each job has one shard in each
rank's host, in rank order, the shards' ranges equal, and JobLayout.wire_of stripes
them one fragment each in turn, so the values of a round are rows of per_fragment
floats for rank 0, 1, ... A call takes as many rows as a rank's slice needs, from where
the last call ended (the worker's CallStream, as an all-reduce job's calls), so that
calls of any size pack the rounds: a slice shorter than a round's costs its own rows,
not a whole round of zeros (0.0625 MB among 8 ranks took 8.7x Gloo's time when each
all-gather began a round). Every rank makes the same calls in the same order, so every
rank's slice is in the same places on every rank.
"""

import numpy as np

from syncfabric.hosts.packets.gradient_wire import HEADER

IP_UDP_BYTES = 20 + 8


def fragment_floats(mtu):
    """The float32s a fragment carries where a datagram fills `mtu` (the controller cuts
    a job's fragments so: model_shards.fragment_payload_bytes)."""
    return (mtu - IP_UDP_BYTES - HEADER.size) // 4


def rows_round_floats(size, floats, mtu):
    """The round of a job of rows for `size` ranks' slices of `floats` each: every shard
    as many whole fragments as a slice needs, so that the controller's fragments, equal
    for every shard, carry each slice in one round with at most a fragment to spare."""
    per_fragment = fragment_floats(mtu)
    return size * -(-floats // per_fragment) * per_fragment


class RankRows:
    """The rows of a job laid out as `layout` (its workers the ranks' hosts, in rank
    order, shard i in rank i's host): a row of `row_floats` holds per_fragment floats
    of every rank's slice, rank by rank (module doc); ValueError where the layout's
    fragments are not so (a controller that cut them otherwise, or aggregators' legs
    that cut the shards)."""

    kind = "job of rows"   # what a refusal calls the job

    def __init__(self, layout):
        self.layout = layout
        ranks = len(layout.workers)
        rank_of_shard = np.zeros(len(layout.shards), dtype=np.int64)
        for shard in layout.shards:
            rank_of_shard[shard.index] = layout.workers.index(shard.host)
        rank_of_block = rank_of_shard[layout.shard_of[layout.wire_of]]
        if layout.floats != layout.count * layout.per_fragment \
                or not np.array_equal(rank_of_block, np.arange(layout.count) % ranks):
            raise ValueError("%s %s: its round is not rows of one whole fragment a rank, "
                             "each in that rank's shard" % (self.kind, layout.id))
        self.ranks = ranks
        self.row_floats = ranks * layout.per_fragment

    def rows_for(self, floats):
        """How many rows a call of `floats` a slice takes."""
        return -(-floats // self.layout.per_fragment)
