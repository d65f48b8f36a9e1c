"""All-gathers through a group's gather job (POST /jobs {"gather": true}): one shard in
each rank's host, whose sums are that rank's values alone, so a rank sends its own slice
once (on its shard's return tree) and takes in the others' (N-1)/N: a ring's bytes
(decisions/gather_plan.py). The all-reduce job's rounds carry an all-gather's whole
output from every rank, -0.0 outside its slice: 8/7 of a ring's bytes at 8 ranks.
A gather job's round is rows of one fragment a rank (rank_rows.py).
"""

import numpy as np
import torch

from syncfabric.torch.collectives import RoundCall, floats_of, rank_slice
from syncfabric.torch.rank_rows import RankRows


class GatherRounds(RankRows):
    """Where each rank's slice goes in the rows of a gather job (rank_rows.RankRows)."""

    kind = "gather job"

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
