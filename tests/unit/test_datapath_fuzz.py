"""Both data paths fed the same hostile datagrams and the same scripted recvmmsg results
(experiments/fuzzing): they accept and reject alike and make the same sums. A bounded
number of examples here; `make fuzz` runs the same generators for minutes under the
sanitizers."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("syncfabric.hosts.datapath._native")

from experiments import datapath_fuzz  # noqa: E402  (after the skip)
from experiments.fuzzing import differential, hostile, targets  # noqa: E402

BOUNDED = settings(max_examples=50, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("target", targets.TARGETS)
@BOUNDED
@given(data=st.data())
def test_both_paths_make_the_same_of_each_targets_hostile_examples(target, data):
    """Summing nodes (shard, aggregator; 1 and 2 cores), a worker's returned sums, and
    scripted receives cut by the rule and then summed."""
    targets.check(target, targets.draw(target, data))


def test_make_fuzz_runs_every_target():
    assert list(datapath_fuzz.TARGETS) == targets.TARGETS


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
