"""Where each rank's slice of an all-gather goes in a gather job's rounds
(syncfabric/torch/gather_rounds.py): every slice in its own shard's fragments, a round
for a slice of the job's size, several pipelined for a longer one, and the outputs
filled from every rank's places of the rounds that come back, in any dtype the wire
carries."""

import numpy as np
import pytest
import torch

from syncfabric.decisions.model_shards import fragment_payload_bytes
from syncfabric.hosts.jobs.job_layout import JobLayout
from syncfabric.torch.gather_rounds import GatherRounds, fragment_floats, gather_job_floats
from tests.harness.loopback_jobs import loopback_job

RANKS = ["w1", "w2", "w3"]
SLICE = 1000


def rounds_of(floats=gather_job_floats(len(RANKS), SLICE, 1500)):
    return GatherRounds(JobLayout(loopback_job(7, RANKS, 4 * floats, 29000, gather=True)))


def test_a_gather_jobs_round_holds_a_slice_of_its_size_from_each_rank_in_its_own_shard():
    assert fragment_floats(1500) == 362 and fragment_floats(9000) == 2237
    rounds = rounds_of()
    layout = rounds.layout
    assert layout.count == 3 * 3 and rounds.per_round == 3 * 362 >= SLICE
    for rank, blocks in enumerate(rounds.blocks):
        fragments = layout.wire_of[blocks]
        assert set(layout.shard_of[fragments].tolist()) == {rank}   # its own shard's
    assert len(np.unique(np.concatenate(rounds.blocks))) == 3 * 3


@pytest.mark.parametrize("mtu", [576, 1500, 4000, 9000])
def test_a_fragments_floats_are_what_the_controller_cuts_fragments_to(mtu):
    """The host's count must be the controller's, or slices would straddle shards."""
    assert 4 * fragment_floats(mtu) == fragment_payload_bytes(mtu)


def spread(rounds, floats):
    """(how many rounds, [each rank's `floats` places in the values of that many rounds]):
    a slice's places in each round (the floats of its blocks), round after round."""
    count = rounds.rounds_for(floats)
    per_fragment = rounds.layout.per_fragment
    starts = np.arange(count)[:, None] * rounds.layout.floats
    places = [(blocks[:, None] * per_fragment + np.arange(per_fragment)).ravel()
              for blocks in rounds.blocks]
    return count, [(starts + found[None, :]).ravel()[:floats] for found in places]


def as_the_fabric_returns(rounds, given):
    """The rounds' values as every rank gets them back: each rank's places hold that
    rank's values (its shard's sums are its own)."""
    floats = given[0].numel()
    count, indices = spread(rounds, floats)
    total = np.zeros(count * rounds.layout.floats, dtype=np.float32)
    for rank, values in enumerate(given):
        total[indices[rank]] = values.to(torch.float32).numpy()
    return torch.from_numpy(total)


@pytest.mark.parametrize("floats, dtype, expected_rounds", [
    (SLICE, torch.float32, 1), (7, torch.bfloat16, 1), (2500, torch.float16, 3)])
def test_each_rank_gives_its_slice_and_every_rank_gets_every_slice(floats, dtype,
                                                                  expected_rounds):
    rounds = rounds_of()
    given = [(torch.arange(floats) % 200 + 1000 * rank).to(dtype) for rank in range(3)]
    totals = as_the_fabric_returns(rounds, given)
    for rank in range(3):
        output = torch.empty(3 * floats, dtype=dtype)
        call = rounds.call([output], given[rank], rank)
        assert len(call.values) == expected_rounds * rounds.layout.floats
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
