"""All-gathers through a group's gather job (POST /jobs {"gather": true}): one shard in
each rank's host, whose sums are that rank's values alone, so a rank sends its own slice
once (on its shard's return tree) and takes in the others' (N-1)/N: a ring's bytes
(decisions/gather_plan.py). The all-reduce job's rounds carry an all-gather's whole
output from every rank, -0.0 outside its slice: 8/7 of a ring's bytes at 8 ranks.

A gather job's round is rows of one fragment a rank: JobLayout.wire_of stripes the
shards' equal ranges one fragment each in turn, shard i in rank i's host, so the values
of a round are rows of per_fragment floats for rank 0, 1, ... A call takes as many
rows as its slice needs, from where the last call ended (the worker's CallStream, as
an all-reduce job's calls), so that all-gathers of any size pack the rounds: a slice
shorter than a round's costs its own rows, not a whole round of zeros (0.0625 MB among
8 ranks took 8.7x Gloo's time when each call began a round). Every rank makes the same
calls in the same order, so every rank's slice is in the same places on every rank.
"""

import numpy as np
import torch

from syncfabric.hosts.packets.gradient_wire import HEADER
from syncfabric.torch.collectives import RoundCall, floats_of, rank_slice

IP_UDP_BYTES = 20 + 8


def fragment_floats(mtu):
    """The float32s a fragment carries where a datagram fills `mtu` (the controller cuts
    a job's fragments so: model_shards.fragment_payload_bytes)."""
    return (mtu - IP_UDP_BYTES - HEADER.size) // 4


def gather_job_floats(size, floats, mtu):
    """A gather job's round for `size` ranks' slices of `floats` each: every shard as
    many whole fragments as a slice needs, so that the controller's fragments, equal for
    every shard, carry each slice in one round with at most a fragment to spare."""
    per_fragment = fragment_floats(mtu)
    return size * -(-floats // per_fragment) * per_fragment


class GatherRounds:
    """Where each rank's slice goes in the rounds of a gather job laid out as `layout`
    (its workers the ranks' hosts, in rank order, shard i in rank i's host): a row of
    `row_floats` holds per_fragment floats of every rank's slice, rank by rank (module
    doc); ValueError where the layout's fragments are not so (a controller that cut
    them otherwise)."""

    def __init__(self, layout):
        self.layout = layout
        ranks = len(layout.workers)
        rank_of_shard = np.zeros(len(layout.shards), dtype=np.int64)
        for shard in layout.shards:
            rank_of_shard[shard.index] = layout.workers.index(shard.host)
        rank_of_block = rank_of_shard[layout.shard_of[layout.wire_of]]
        if layout.floats != layout.count * layout.per_fragment \
                or not np.array_equal(rank_of_block, np.arange(layout.count) % ranks):
            raise ValueError("gather job %s: its round is not rows of one whole fragment a "
                             "rank, each in that rank's shard" % layout.id)
        self.ranks = ranks
        self.row_floats = ranks * layout.per_fragment

    def rows_for(self, floats):
        """How many rows an all-gather of `floats` a slice takes."""
        return -(-floats // self.layout.per_fragment)

    def call(self, outputs, tensor, rank):
        """The RoundCall of an all-gather (collectives.allgather_eligible's arguments, the
        call found eligible): this rank's input in its places of as many rows as it needs,
        zeros in the others' (no rank sends another's places); place() copies each rank's
        places of the rows that come back into its slice of the outputs. Whole rows at a
        time, never an index a float (8 bytes a float: 214 MB a rank for a 25 MB
        all-gather of 8)."""
        floats, rows = tensor.numel(), self.rows_for(tensor.numel())
        per_fragment = self.layout.per_fragment
        mine = np.zeros(rows * per_fragment, dtype=np.float32)
        mine[:floats] = floats_of([tensor])
        values = np.zeros((rows, self.ranks, per_fragment), dtype=np.float32)
        values[:, rank, :] = mine.reshape(rows, per_fragment)

        def place(total):
            by_rank = total.numpy().reshape(rows, self.ranks, per_fragment)
            for each in range(self.ranks):
                gathered = by_rank[:, each, :].reshape(-1)[:floats]
                rank_slice(outputs, each, floats).copy_(torch.from_numpy(gathered))
        return RoundCall(values.reshape(-1), list(outputs), place)
