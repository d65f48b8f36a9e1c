"""Where each rank's slice of a reduce-scatter goes in a scatter job's rounds
(syncfabric/torch/scatter_rounds.py): slice q of every rank's input in rank q's places
of rows of one fragment a rank, as many rows as a slice needs, premultiplied as the op
says; the output read from this rank's own places of what comes back, divided as the op
says, in any dtype the wire carries."""

import numpy as np
import pytest
import torch
import torch.distributed as dist

from syncfabric.hosts.jobs.job_layout import JobLayout
from syncfabric.torch.rank_rows import rows_round_floats
from syncfabric.torch.scatter_rounds import ScatterRounds
from tests.harness.loopback_jobs import loopback_job

RANKS = ["w1", "w2", "w3"]
SLICE = 1000


def rounds_of():
    floats = rows_round_floats(len(RANKS), SLICE, 1500)
    return ScatterRounds(JobLayout(loopback_job(7, RANKS, 4 * floats, 29000, scatter=True)))


def places(rounds, rank, floats):
    """Rank `rank`'s `floats` places in the values of as many rows as they need."""
    count, per_fragment = rounds.rows_for(floats), rounds.layout.per_fragment
    starts = np.arange(count)[:, None] * rounds.row_floats + rank * per_fragment
    return (starts + np.arange(per_fragment)).ravel()[:floats]


@pytest.mark.parametrize("floats, dtype, op, expected_rows", [
    (SLICE, torch.float32, dist.ReduceOp.SUM, 3), (7, torch.bfloat16, dist.ReduceOp.SUM, 1),
    (2500, torch.float16, dist.ReduceOp.AVG, 7)])
def test_each_rank_gives_every_slice_in_its_ranks_places_and_keeps_its_own_sums(
        floats, dtype, op, expected_rows):
    rounds = rounds_of()
    inputs = [(torch.arange(3 * floats) % 200 + 10 * rank).to(dtype) for rank in range(3)]
    calls = [rounds.call(torch.empty(floats, dtype=dtype), [inputs[rank]], op, rank)
             for rank in range(3)]
    total = np.sum([call.values for call in calls], axis=0)   # what the shards sum
    for rank, call in enumerate(calls):
        assert len(call.values) == expected_rows * rounds.row_floats   # not whole rounds
        for owner in range(3):
            given = inputs[rank].to(torch.float32)[owner * floats:(owner + 1) * floats]
            assert np.array_equal(call.values[places(rounds, owner, floats)], given.numpy())
        returned = np.full_like(total, np.nan)   # no other rank's places are read
        returned[places(rounds, rank, floats)] = total[places(rounds, rank, floats)]
        call.place(torch.from_numpy(returned))
        expected = sum(i.to(torch.float32)[rank * floats:(rank + 1) * floats] for i in inputs)
        if op == dist.ReduceOp.AVG:
            expected = expected / 3
        assert torch.equal(call.outputs[0], expected.to(dtype))
