"""The fuzzing targets: what each draws (hostile.py) and how both data paths are checked
on it (differential.py). The suite's bounded test (tests/unit/test_datapath_fuzz.py) and
make fuzz's campaign (campaign.py) both take them from here."""

from hypothesis import strategies as st

from experiments.fuzzing import differential, hostile

SUMMING = {"shard, 1 core": ("shard", 1), "shard, 2 cores": ("shard", 2),
           "aggregator, 1 core": ("aggregator", 1), "aggregator, 2 cores": ("aggregator", 2)}
RETURNS, SCRIPTED = "returned sums", "scripted receives"
GATHER_RETURNS = "gather job's returned sums"   # its sums carry its shard's worker alone
TARGETS = list(SUMMING) + [RETURNS, GATHER_RETURNS, SCRIPTED]
shapes = st.sampled_from(sorted(hostile.LAYOUTS)).map(hostile.LAYOUTS.get)
open_rounds = st.lists(st.sampled_from(hostile.ROUND_EDGES), min_size=1, max_size=3, unique=True)


def draw(target, data):
    """One example of `target` from hypothesis's `data`: (layout shape, what is fed)."""
    shape = data.draw(shapes)
    if target == SCRIPTED:
        return shape, data.draw(hostile.scripted(*shape))
    if target in (RETURNS, GATHER_RETURNS):
        gather = target == GATHER_RETURNS
        return shape, (data.draw(hostile.returns(*shape, gather=gather)),
                       data.draw(open_rounds))
    _kind, cores = SUMMING[target]
    receiving = data.draw(st.lists(st.integers(0, cores - 1), min_size=4, max_size=4))
    return shape, list(zip(receiving, data.draw(hostile.batches(*shape))))


def check(target, example):
    """Feed both paths `example` (draw's): differential.Difference if they differ.
    Returns (datagrams fed to each path, scripted receives)."""
    shape, fed = example
    if target == SCRIPTED:
        differential.check_cutting([message for message, _slot in fed],
                                   [slot for _message, slot in fed], shape)
        return 0, 1
    if target in (RETURNS, GATHER_RETURNS):
        batches, numbers = fed
        differential.check_placing(shape, batches, numbers, target == GATHER_RETURNS)
        return sum(map(len, batches)), 0
    kind, cores = SUMMING[target]
    differential.check_summing(kind, cores, shape, fed)
    return sum(len(batch) for _core, batch in fed), 0
