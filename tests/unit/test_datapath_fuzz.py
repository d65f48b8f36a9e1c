"""Both data paths fed the same hostile datagrams and the same scripted recvmmsg results
(experiments/fuzzing): they accept and reject alike and make the same sums. A bounded
number of examples here; `make fuzz` runs the same generators for minutes under the
sanitizers."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("syncfabric.hosts.datapath._native")

from experiments.fuzzing import differential, hostile  # noqa: E402  (after the skip)

BOUNDED = settings(max_examples=60, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SHAPES = sorted(hostile.LAYOUTS)


def layout_and(make):
    """A layout's name and `make(per_fragment, floats)`'s strategy for it."""
    return st.sampled_from(SHAPES).flatmap(
        lambda name: st.tuples(st.just(hostile.LAYOUTS[name]), make(*hostile.LAYOUTS[name])))


@BOUNDED
@given(kind=st.sampled_from(["shard", "aggregator"]), cores=st.sampled_from([1, 2]),
       drawn=layout_and(hostile.batches), targets=st.lists(st.integers(0, 1), min_size=4, max_size=4))
def test_summing_nodes_make_the_same_of_hostile_batches(kind, cores, drawn, targets):
    shape, batches = drawn
    differential.check_summing(kind, cores, shape, list(zip(targets, batches)))


@BOUNDED
@given(drawn=layout_and(hostile.returns),
       numbers=st.lists(st.sampled_from(hostile.ROUND_EDGES), min_size=1, max_size=3, unique=True))
def test_a_worker_places_the_same_of_hostile_returns(drawn, numbers):
    shape, batches = drawn
    differential.check_placing(shape, batches, numbers)


@BOUNDED
@given(drawn=layout_and(hostile.scripted))
def test_scripted_receives_are_cut_by_the_rule_and_summed_alike(drawn):
    shape, results = drawn
    messages = [message for message, _data in results]
    differential.check_cutting(messages, [data for _message, data in results], shape)


def test_the_reference_cut_names_each_case():
    """cut_reference on hand-made results: GRO of 128 segments kept, 129 dropped as
    oversized; a control message cut short, or a datagram longer than its slot, dropped
    as truncated; an empty datagram one empty segment."""
    gro = lambda size: (hostile.CMSG_HEADER.pack(20, 17, 104) + size.to_bytes(4, "little")
                        + bytes(4))
    messages = [(128, 0, gro(1), "10.0.0.11", 1), (129, 0, gro(1), "10.0.0.11", 1),
                (100, hostile.MSG_CTRUNC, gro(10), "10.0.0.11", 1),
                (hostile.SLOT_BYTES + 1, 0, b"", "10.0.0.11", 1), (0, 0, b"", "10.0.0.12", 2)]
    segments, truncated, oversized = differential.cut_reference(messages)
    assert len(segments) == 129 and (truncated, oversized) == (2, 1)
    assert segments[-1] == (4, 0, 0, "10.0.0.12", 2)
    differential.check_cutting(messages, [bytes(200)] * 5, hostile.LAYOUTS["small"])
