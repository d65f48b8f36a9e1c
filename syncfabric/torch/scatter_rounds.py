"""Reduce-scatters through a group's scatter job (POST /jobs {"scatter": true}): the
gradient half of a round. One shard in each rank's host, its range that rank's slice,
keeps its own sums, so a rank sends its parts of the others' slices, (N-1)/N of its
input, and takes in the others' parts of its own: a ring reduce-scatter's bytes
(decisions/scatter_plan.py). Through the all-reduce job's rounds, every rank's whole
input goes out and the whole sum comes back: twice a ring's bytes. A scatter job's
round is rows of one fragment a rank (rank_rows.py).
"""

import numpy as np

from syncfabric.torch.collectives import RoundCall, floats_of, reduce_scatter_eligible, write_back
from syncfabric.torch.rank_rows import RankRows


class ScatterRounds(RankRows):
    """Where each rank's slice of a reduce-scatter goes in the rows of a scatter job
    (rank_rows.RankRows)."""

    kind = "scatter job"

    def call(self, output, inputs, op, rank):
        """The RoundCall of a reduce-scatter (collectives.reduce_scatter_eligible's
        arguments, the call found eligible): slice q of this rank's input, premultiplied
        as the op says, in rank q's places of as many rows as a slice needs (zeros after
        its end); place() writes this rank's places of the rows that come back, its own
        shard's sums, into the output, divided as the op says. The other ranks' places
        of what comes back are not sums (their sums stay in their hosts) and are not
        read."""
        floats = output.numel()
        rows, per_fragment = self.rows_for(floats), self.layout.per_fragment
        factor, divide = reduce_scatter_eligible(output, inputs, op, self.ranks, 0)
        slices = np.zeros((self.ranks, rows * per_fragment), dtype=np.float32)
        slices[:, :floats] = floats_of(inputs, factor).reshape(self.ranks, floats)
        values = slices.reshape(self.ranks, rows, per_fragment).transpose(1, 0, 2)

        def place(total):
            mine = total.reshape(rows, self.ranks, per_fragment)[:, rank, :]
            write_back(mine.reshape(-1)[:floats], [output], divide)
        return RoundCall(np.ascontiguousarray(values).reshape(-1), [output], place)
