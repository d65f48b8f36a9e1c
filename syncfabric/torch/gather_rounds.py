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
from syncfabric.torch.collectives import RoundCall, floats_of, write_back

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
    (its workers the ranks' hosts, in rank order)."""

    def __init__(self, layout):
        self.layout = layout
        blocks = np.arange(layout.count)
        shard_of_block = layout.shard_of[layout.wire_of[blocks]]
        rank_of_shard = {shard.index: layout.workers.index(shard.host)
                         for shard in layout.shards}
        places = [[] for _rank in layout.workers]
        for block, shard in zip(blocks.tolist(), shard_of_block.tolist()):
            start = block * layout.per_fragment
            places[rank_of_shard[shard]].append(
                np.arange(start, min(start + layout.per_fragment, layout.floats)))
        places = [np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
                  for found in places]
        self.per_round = min(len(found) for found in places)   # a slice's floats a round
        self.places = [found[:self.per_round] for found in places]

    def rounds_for(self, floats):
        """How many rounds an all-gather of `floats` a slice takes."""
        return -(-floats // self.per_round)

    def call(self, outputs, tensor, rank):
        """The RoundCall of an all-gather (collectives.allgather_call's arguments, the
        call already found eligible): this rank's input at its places, zeros elsewhere
        (no rank sends another's places); the outputs filled from every rank's places of
        the rounds that come back. A round at a time as a row: a slice's places in every
        round are the same, so no index as long as the call is made (8 bytes a float:
        214 MB a rank for a 25 MB all-gather of 8)."""
        floats, rounds = tensor.numel(), self.rounds_for(tensor.numel())
        mine = np.zeros(rounds * self.per_round, dtype=np.float32)
        mine[:floats] = floats_of([tensor])
        values = np.zeros((rounds, self.layout.floats), dtype=np.float32)
        values[:, self.places[rank]] = mine.reshape(rounds, self.per_round)

        def place(total):
            by_round = total.numpy().reshape(rounds, self.layout.floats)
            gathered = np.concatenate([by_round[:, places].reshape(-1)[:floats]
                                       for places in self.places])
            write_back(torch.from_numpy(gathered), outputs)
        return RoundCall(values.reshape(-1), list(outputs), place)
