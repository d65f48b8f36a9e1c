"""Where each rank's slice of an all-gather goes in a gather job's rounds
(syncfabric/torch/gather_rounds.py): rows of one fragment a rank, each in its own
shard's, as many rows as a slice needs (a short one does not take a whole round), and
the outputs filled from every rank's places of the rows that come back, in any dtype
the wire carries."""

import numpy as np
import pytest
import torch

from syncfabric.decisions.model_shards import fragment_payload_bytes
from syncfabric.hosts.jobs.job_layout import JobLayout
from syncfabric.torch.gather_rounds import GatherRounds
from syncfabric.torch.rank_rows import fragment_floats, rows_round_floats
from tests.harness.loopback_jobs import loopback_job

RANKS = ["w1", "w2", "w3"]
SLICE = 1000


def rounds_of(floats=rows_round_floats(len(RANKS), SLICE, 1500)):
    return GatherRounds(JobLayout(loopback_job(7, RANKS, 4 * floats, 29000, gather=True)))


def test_a_gather_jobs_round_is_rows_of_one_fragment_a_rank_each_in_its_own_shard():
    assert fragment_floats(1500) == 362 and fragment_floats(9000) == 2237
    rounds = rounds_of()
    layout = rounds.layout
    assert layout.count == 3 * 3 and rounds.row_floats == 3 * 362
    blocks = layout.shard_of[layout.wire_of]   # each block's shard: rank 0, 1, 2 in turn
    assert blocks.tolist() == [0, 1, 2] * 3


@pytest.mark.parametrize("fragments_bytes", [4 * 1448, 3 * 1448 - 4])
def test_a_layout_not_cut_in_rows_is_refused(fragments_bytes):
    """Four fragments over three shards, or a short last fragment: no rows."""
    with pytest.raises(ValueError, match="not rows of one whole fragment a rank"):
        GatherRounds(JobLayout(loopback_job(7, RANKS, fragments_bytes, 29000, gather=True)))


@pytest.mark.parametrize("mtu", [576, 1500, 4000, 9000])
def test_a_fragments_floats_are_what_the_controller_cuts_fragments_to(mtu):
    """The host's count must be the controller's, or slices would straddle shards."""
    assert 4 * fragment_floats(mtu) == fragment_payload_bytes(mtu)


def spread(rounds, floats):
    """(how many rows, [each rank's `floats` places in the values of that many rows]):
    a slice's fragment in each row, row after row."""
    count = rounds.rows_for(floats)
    per_fragment = rounds.layout.per_fragment
    starts = np.arange(count)[:, None] * rounds.row_floats
    return count, [(starts + rank * per_fragment + np.arange(per_fragment)).ravel()[:floats]
                   for rank in range(rounds.ranks)]


def as_the_fabric_returns(rounds, given):
    """The rows' values as every rank gets them back: each rank's places hold that
    rank's values (its shard's sums are its own)."""
    floats = given[0].numel()
    count, indices = spread(rounds, floats)
    total = np.zeros(count * rounds.row_floats, dtype=np.float32)
    for rank, values in enumerate(given):
        total[indices[rank]] = values.to(torch.float32).numpy()
    return torch.from_numpy(total)


@pytest.mark.parametrize("floats, dtype, expected_rows", [
    (SLICE, torch.float32, 3), (7, torch.bfloat16, 1), (2500, torch.float16, 7)])
def test_each_rank_gives_its_slice_and_every_rank_gets_every_slice(floats, dtype,
                                                                  expected_rows):
    rounds = rounds_of()
    given = [(torch.arange(floats) % 200 + 1000 * rank).to(dtype) for rank in range(3)]
    totals = as_the_fabric_returns(rounds, given)
    for rank in range(3):
        output = torch.empty(3 * floats, dtype=dtype)
        call = rounds.call([output], given[rank], rank)
        assert len(call.values) == expected_rows * rounds.row_floats   # not whole rounds
        mine = spread(rounds, floats)[1][rank]
        assert np.array_equal(call.values[mine], given[rank].to(torch.float32).numpy())
        assert np.count_nonzero(np.delete(call.values, mine)) == 0   # nothing of another's
        call.place(totals)
        assert torch.equal(output, torch.cat(given))


def test_a_list_of_outputs_is_filled_slice_by_slice():
    rounds = rounds_of()
    given = [torch.full((SLICE,), float(rank + 1)) for rank in range(3)]
    outputs = [torch.empty(SLICE) for _rank in range(3)]
    rounds.call(outputs, given[0], 0).place(as_the_fabric_returns(rounds, given))
    assert all(torch.equal(output, values) for output, values in zip(outputs, given))
