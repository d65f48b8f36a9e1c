"""All-gathers through a group's gather job (POST /jobs {"gather": true}): one shard in
each rank's host, whose sums are that rank's values alone, so a rank sends its own slice
once (on its shard's return tree) and takes in the others' (N-1)/N: a ring's bytes
(decisions/gather_plan.py). The all-reduce job's rounds carry an all-gather's whole
output from every rank, -0.0 outside its slice: 8/7 of a ring's bytes at 8 ranks.

A rank's slice lies in the blocks of a round's values that its shard's fragments carry
(JobLayout.wire_of stripes a round's blocks over the shards); each call begins at a
round's start and takes as many whole rounds as its longest slice needs, so that every
rank's slice is in the same places of the same rounds on every rank.
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
    (its workers the ranks' hosts, in rank order): `blocks`, for each rank, the blocks of
    per_fragment floats of a round (JobLayout.wire_of's) that its own shard's fragments
    carry, as many for every rank; a round carries per_round floats of each slice."""

    def __init__(self, layout):
        self.layout = layout
        self.whole = layout.floats // layout.per_fragment   # a short last block unused
        rank_of_shard = np.zeros(len(layout.shards), dtype=np.int64)
        for shard in layout.shards:
            rank_of_shard[shard.index] = layout.workers.index(shard.host)
        rank_of_block = rank_of_shard[layout.shard_of[layout.wire_of[:self.whole]]]
        blocks = [np.flatnonzero(rank_of_block == rank) for rank in range(len(layout.workers))]
        most = min(len(found) for found in blocks)
        self.blocks = [found[:most] for found in blocks]
        self.per_round = most * layout.per_fragment   # a slice's floats a round

    def rounds_for(self, floats):
        """How many rounds an all-gather of `floats` a slice takes."""
        return -(-floats // self.per_round)

    def in_blocks(self, values, rounds):
        """A view of `rounds` rounds' float32 `values` as (round, block, float of the
        block), the whole blocks only."""
        by_round = values.reshape(rounds, self.layout.floats)
        return by_round[:, :self.whole * self.layout.per_fragment].reshape(
            rounds, self.whole, self.layout.per_fragment)

    def call(self, outputs, tensor, rank):
        """The RoundCall of an all-gather (collectives.allgather_eligible's arguments, the
        call found eligible): this rank's input in its blocks, zeros elsewhere (no rank
        sends another's places); place() copies each rank's blocks of the rounds that
        come back straight into its slice of the outputs. Whole blocks at a time, never
        an index a float (8 bytes a float: 214 MB a rank for a 25 MB all-gather of 8)."""
        floats, rounds = tensor.numel(), self.rounds_for(tensor.numel())
        mine = np.zeros(rounds * self.per_round, dtype=np.float32)
        mine[:floats] = floats_of([tensor])
        values = np.zeros(rounds * self.layout.floats, dtype=np.float32)
        self.in_blocks(values, rounds)[:, self.blocks[rank]] = mine.reshape(
            rounds, len(self.blocks[rank]), self.layout.per_fragment)

        def place(total):
            by_block = self.in_blocks(total.numpy(), rounds)
            for each, blocks in enumerate(self.blocks):
                gathered = by_block[:, blocks].reshape(-1)[:floats]
                rank_slice(outputs, each, floats).copy_(torch.from_numpy(gathered))
        return RoundCall(values, list(outputs), place)
