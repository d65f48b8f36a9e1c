"""The gradient wire's arithmetic without a network: fragments, sums of aggregates, duplicates,
against a float32 summation bound checked here."""

import numpy as np
import pytest

from syncfabric.hosts.packets.gradient_wire import (HEADER, FragmentSums, floats_per_fragment,
                                            fragment_count, fragment_packet)

FLOATS = 3 * floats_per_fragment() + 17   # a short last fragment
JOB, ROUND, SEED = 7, 1, 3


def gradient(seed, worker, number, floats):
    """Worker `worker`'s gradient in round `number`: seeded standard normal float32."""
    return np.random.default_rng([seed, worker, number]).standard_normal(floats, dtype=np.float32)


def exact_sum_check(total, seed, workers, number, floats, start=0):
    """(ok, worst error / bound) of `total`, the sum of elements start.. of every
    worker's gradient, against their float64 sum."""
    stop = start + len(total)
    exact = np.zeros(len(total))
    magnitude = np.zeros(len(total))
    for worker in range(workers):
        g = gradient(seed, worker, number, floats)[start:stop].astype(np.float64)
        exact += g
        magnitude += np.abs(g)
    unit = 2.0 ** -24
    bound = workers * unit * magnitude + unit * np.abs(exact) + np.finfo(np.float32).tiny
    ratio = float(np.max(np.abs(total.astype(np.float64) - exact) / bound))
    return ratio <= 1.0, ratio


def fragments(worker):
    """Worker `worker`'s datagrams, as the worker program builds them."""
    values = gradient(SEED, worker, ROUND, FLOATS)
    return [fragment_packet(JOB, ROUND, i, 1 << worker, values)
            for i in range(fragment_count(FLOATS))]


def everyone(workers):
    return [(1 << workers) - 1] * fragment_count(FLOATS)


def test_an_aggregate_of_aggregates_is_the_exact_sum():
    # workers 0, 1 through an aggregator; 2, 3 straight to the PS
    aggregator = FragmentSums(JOB, ROUND, FLOATS, [0b0011] * fragment_count(FLOATS))
    completed = [aggregator.add(p) for w in (0, 1) for p in fragments(w)]
    assert sorted(i for i in completed if i is not None) == list(range(fragment_count(FLOATS)))
    ps = FragmentSums(JOB, ROUND, FLOATS, everyone(4))
    for index in range(fragment_count(FLOATS)):
        ps.add(fragment_packet(JOB, ROUND, index, 0b0011, aggregator.total()))
    for worker in (2, 3):
        for packet in fragments(worker):
            ps.add(packet)
    assert ps.missing() == []
    ok, ratio = exact_sum_check(ps.total(), SEED, 4, ROUND, FLOATS)
    assert ok and ratio <= 1


def test_late_and_repeated_copies_are_never_added_twice():
    ps = FragmentSums(JOB, ROUND, FLOATS, everyone(2))
    for packet in fragments(0) + fragments(0) + fragments(1)[1:]:
        ps.add(packet)
    assert ps.missing() == [[0, 0b10]]                    # worker 1's fragment 0 is missing
    aggregate = FragmentSums(JOB, ROUND, FLOATS, [0b11] * fragment_count(FLOATS))
    for packet in fragments(0) + fragments(1):
        aggregate.add(packet)
    ps.add(fragment_packet(JOB, ROUND, 0, 0b11, aggregate.total()))   # overlaps worker 0: refused
    assert ps.missing() == [[0, 0b10]]
    ps.add(fragments(1)[0])
    assert ps.missing() == []
    assert exact_sum_check(ps.total(), SEED, 2, ROUND, FLOATS)[0]


def test_other_jobs_rounds_and_strangers_are_ignored():
    ps = FragmentSums(JOB, ROUND, FLOATS, everyone(1))
    stranger = HEADER.pack(JOB, ROUND, 0, fragment_count(FLOATS), 0b100) + bytes(8)
    other_round = HEADER.pack(JOB, ROUND + 1, 0, fragment_count(FLOATS), 0b1) + bytes(8)
    other_job = HEADER.pack(JOB + 1, ROUND, 0, fragment_count(FLOATS), 0b1) + bytes(8)
    for packet in (stranger, other_round, other_job):
        assert ps.add(packet) is None
    assert len(ps.missing()) == fragment_count(FLOATS)


def test_the_check_catches_a_wrong_sum():
    ps = FragmentSums(JOB, ROUND, FLOATS, everyone(3))
    for worker in range(3):
        for packet in fragments(worker):
            ps.add(packet)
    total = ps.total().copy()
    assert exact_sum_check(total, SEED, 3, ROUND, FLOATS)[0]
    total[5] += 1e-3
    assert not exact_sum_check(total, SEED, 3, ROUND, FLOATS)[0]
    assert not exact_sum_check(ps.total() - gradient(SEED, 2, ROUND, FLOATS), SEED, 3, ROUND,
                               FLOATS)[0]   # a worker missed


@pytest.mark.parametrize("workers", [2, 16, 64])
def test_float32_reordering_stays_within_the_documented_bound(workers):
    rng = np.random.default_rng(workers)
    grads = [gradient(SEED, w, ROUND, FLOATS) for w in range(workers)]
    total = np.zeros(FLOATS, dtype=np.float32)
    for w in rng.permutation(workers):
        total += grads[w]
    assert exact_sum_check(total, SEED, workers, ROUND, FLOATS)[0]


def test_fragment_ranges_cover_every_fragment_once_in_proportion_to_the_split():
    from syncfabric.decisions.model_shards import fragment_ranges
    assert fragment_ranges({"ps": 1.0}, 10) == {"ps": (0, 10)}
    assert fragment_ranges({"s1": 0.6, "s2": 0.4}, 10) == {"s1": (0, 6), "s2": (6, 10)}
    ranges = fragment_ranges({"a": 0.001, "b": 0.998, "c": 0.001}, 5)
    assert ranges["a"][0] == 0 and ranges["c"][1] == 5
    assert all(last > first for first, last in ranges.values())   # every PS holds one at least
    assert ranges["a"][1] == ranges["b"][0] and ranges["b"][1] == ranges["c"][0]


@pytest.mark.parametrize("model_bytes, shards", [(1_204_264, 7), (1_000_000, 3), (100, 7), (4, 1)])
def test_fragments_fill_the_mtu_as_far_as_equal_shards_hold_as_many(model_bytes, shards):
    from syncfabric.decisions.model_shards import (even_fragment_bytes, fragment_count,
                                                   fragment_payload_bytes, fragment_ranges)
    size = even_fragment_bytes(model_bytes, shards, 9000)
    count = fragment_count(model_bytes, size)
    assert size % 4 == 0 and size <= fragment_payload_bytes(9000)
    assert count % shards == 0 and count - shards < fragment_count(model_bytes, 8948)
    held = fragment_ranges({i: 1 / shards for i in range(shards)}, count)
    assert {last - first for first, last in held.values()} == {count // shards}


def test_workers_with_equal_shares_send_each_aggregator_the_same_fragments():
    """The plan may list a fragment's aggregators in any order; each aggregator must still
    get the same fragments from every worker, or its output carries both halves."""
    from syncfabric.decisions.model_shards import worker_legs

    def leg(node, share):
        return {"ps": "h1", "node": node, "share": share, "rate_mbps": 2.5}

    held = {"h1": (0, 10)}
    one = worker_legs([leg("agg-b", 0.5), leg("agg-a", 0.5)], ["h1"], held, {})
    other = worker_legs([leg("agg-a", 0.5), leg("agg-b", 0.5)], ["h1"], held, {})
    assert one == other
    assert [(item["host"], item["fragments"]) for item in one] == [("agg-a", [0, 5]),
                                                                   ("agg-b", [5, 10])]
    direct = worker_legs([leg("h1", 0.5), leg("agg-a", 0.5)], ["h1"], held, {})
    assert [item["host"] for item in direct] == ["agg-a", "h1"]   # the shard's host takes the rest


def test_an_aggregator_gets_nested_ranges_from_workers_that_skip_the_one_before_it():
    """One worker sends to agg-a and agg-b, the other to agg-b only: agg-b's span starts
    after the widest agg-a share for both, and the shard's host fills the gaps."""
    from syncfabric.decisions.model_shards import aggregator_offsets, spans_nest, worker_legs
    both = [{"ps": "h1", "node": "agg-a", "share": 0.4, "rate_mbps": 4.0},
            {"ps": "h1", "node": "agg-b", "share": 0.2, "rate_mbps": 2.0},
            {"ps": "h1", "node": "h1", "share": 0.4, "rate_mbps": 4.0}]
    one = [{"ps": "h1", "node": "agg-b", "share": 0.3, "rate_mbps": 3.0},
           {"ps": "h1", "node": "h1", "share": 0.7, "rate_mbps": 7.0}]
    offsets = aggregator_offsets({("w1", "h1"): [(leg["node"], leg["share"]) for leg in both],
                                  ("w2", "h1"): [(leg["node"], leg["share"]) for leg in one]})
    assert offsets == {("h1", "agg-a"): 0.0, ("h1", "agg-b"): 0.4}
    held = {"h1": (0, 100)}
    first = worker_legs(both, ["h1"], held, offsets)
    second = worker_legs(one, ["h1"], held, offsets)
    assert [(leg["host"], leg["fragments"]) for leg in second] == [
        ("h1", [0, 40]), ("agg-b", [40, 70]), ("h1", [70, 100])]
    assert [leg["rate_mbps"] for leg in second] == pytest.approx([4.0, 3.0, 3.0])
    assert [(leg["host"], leg["fragments"]) for leg in first] == [
        ("agg-a", [0, 40]), ("agg-b", [40, 60]), ("h1", [60, 100])]
    spans = [tuple(leg["fragments"]) for leg in first + second if leg["host"] == "agg-b"]
    assert spans_nest(spans)


def test_the_controller_sizes_fragments_as_the_hosts_frame_them():
    from syncfabric.decisions import model_shards
    from syncfabric.hosts.packets.gradient_wire import wire_mbit
    from syncfabric.hosts.packets.wire import FRAME_OVERHEAD
    assert model_shards.FRAGMENT_PAYLOAD_BYTES == floats_per_fragment() * 4
    assert model_shards.FRAGMENT_WIRE_OVERHEAD_BYTES == FRAME_OVERHEAD + HEADER.size
    assert model_shards.fragment_count(4 * 1000) == fragment_count(1000)
    assert model_shards.wire_mbit(4 * 1000) == wire_mbit(1000)


def test_jumbo_fragments_are_sized_alike_on_both_sides(monkeypatch):
    from syncfabric.decisions import model_shards
    from syncfabric.hosts.packets.wire import MTU_ENV
    monkeypatch.setenv(MTU_ENV, "9000")
    assert model_shards.fragment_payload_bytes(9000) == floats_per_fragment() * 4 == 8948
    assert model_shards.fragment_count(4 * 100000, 8948) == fragment_count(100000)

