"""Hosts follow a job's new rates between rounds (hosts/rate_following.py): every host
picks the same layout for every round, whenever it read the new generation; a summing
node paces each round's sums at that round's rates; a daemon keeps its parts (and the
sums in flight) through a rate-only generation, and serves anew one that moved them."""

import copy

import pytest

from syncfabric.hosts.jobs.job_daemon import JobDaemon
from syncfabric.hosts.jobs.job_layout import BORROW_SLACK, JobError, JobLayout
from syncfabric.hosts.jobs.job_roles import AggregatorNode, ShardNode
from syncfabric.hosts.jobs.rate_following import RateSchedule, same_shape
from syncfabric.hosts.transport.receivers import receiving_socket
from tests.unit.test_job_roles import ADDRESS, PORT, report


def next_generation(base, factor, effective_round, generation=2):
    """The job's report with every rate scaled by factor, from effective_round."""
    moved = copy.deepcopy(base)
    moved.update(generation=generation, effective_round=effective_round)
    for shard in moved["shards"]:
        shard["return"]["rate_mbps"] *= factor
    for legs in moved["destinations"].values():
        for leg in legs:
            leg["rate_mbps"] *= factor
    for aggregator in moved["aggregators"]:
        aggregator["rate_mbps"] *= factor
    return moved


def test_a_rate_change_is_the_same_shape_and_a_moved_leg_is_not():
    base = report(aggregated=True)
    assert same_shape(JobLayout(base), JobLayout(next_generation(base, 0.5, 9)))
    moved = copy.deepcopy(base)
    moved["destinations"]["w1"][0].update(host="ps", address=ADDRESS["ps"])
    assert not same_shape(JobLayout(base), JobLayout(moved))


def test_every_host_picks_the_same_rates_for_every_round_whenever_it_read_them():
    base = report(aggregated=True)
    early, late = RateSchedule(JobLayout(base)), RateSchedule(JobLayout(base))
    early.follow(JobLayout(next_generation(base, 0.5, 8)))         # read at round 5
    late_rates = [late.at(n).legs["w1"][0].rate_mbps for n in range(1, 8)]   # before it read
    late.follow(JobLayout(next_generation(base, 0.5, 8)))          # read at round 7
    assert late_rates == [100.0] * 7
    for number in range(1, 20):
        assert early.at(number).legs["w1"][0].rate_mbps == late.at(number).legs["w1"][0].rate_mbps
    assert [early.at(n).legs["w1"][0].rate_mbps for n in (7, 8, 30)] == [100.0, 50.0, 50.0]
    early.follow(JobLayout(next_generation(base, 2.0, 12, generation=3)))
    assert [early.at(n).aggregations[0].rate_mbps for n in (7, 8, 11, 12)] == [100, 50, 50, 200]


def test_summing_nodes_pace_each_rounds_sums_at_that_rounds_rates():
    base = report(aggregated=True)
    layout = JobLayout(base)
    schedule = RateSchedule(layout)
    schedule.follow(JobLayout(next_generation(base, 0.25, 4)))
    aggregator = AggregatorNode(layout, layout.aggregations[0],
                                receiving_socket(ADDRESS["agg"], PORT, reuse=False), rates=schedule)
    shard = ShardNode(layout, layout.shards[0], receiving_socket(ADDRESS["ps"], PORT, reuse=False),
                      rates=schedule)
    try:
        for number in (3, 4):
            aggregator.completed(number, 0)
            shard._return([(number, 1)])
        assert [rate for _key, _address, rate in aggregator.sums_out.queue] == [100.0, 25.0]
        assert [rate for _key, _address, rate in shard.sums_out.queue] == [100.0, 25.0]
    finally:
        aggregator.sock.close()
        shard.sock.close()


def test_a_daemon_keeps_its_parts_through_new_rates_and_serves_anew_a_moved_job():
    base = report(aggregated=True)
    daemon = JobDaemon(None, "agg")
    for loop in daemon.loops:
        loop.start()
    try:
        daemon.follow([base])
        parts = daemon.served[7][1]
        daemon.follow([next_generation(base, 0.5, 6)])
        assert daemon.served[7] == (2, parts)   # the same nodes: their sums in flight kept
        node = parts[0][0]
        assert node.rates.at(5).aggregations[0].rate_mbps == 100.0
        assert node.rates.at(6).aggregations[0].rate_mbps == 50.0
        moved = next_generation(base, 1.0, 0, generation=3)
        moved["aggregators"][0]["workers"] = {"w1": [0, 4]}
        moved["destinations"]["w2"][0].update(host="ps", address=ADDRESS["ps"])
        daemon.follow([moved])
        assert daemon.served[7][0] == 3 and daemon.served[7][1] is not parts
    finally:
        for job_id in list(daemon.served):
            daemon._drop(job_id)
        for loop in daemon.loops:
            loop.stop()


def in_a_window(base, into_agg_mbps):
    """The job's report, its generation unchanged, once interleaving gave it a window at
    3x its rate and a budget into its aggregator."""
    return dict(base, period_s=4.0, phase_offset_s=1.0, window_s=2.0, window_mbps=300.0,
                rate_mbps=100.0, borrow={"dscp": 10, "ceiling_mbps": 1000.0,
                                         "aggregators_mbps": {"agg": into_agg_mbps}})


def test_a_window_and_a_budget_that_move_without_a_new_generation_are_taken_at_once():
    base = report(aggregated=True)
    schedule = RateSchedule(JobLayout(base))
    schedule.follow(JobLayout(next_generation(base, 0.5, 6)))
    assert schedule.at(9).window_factor is None
    windowed = next_generation(in_a_window(base, 40.0), 0.5, 6)
    schedule.refresh(JobLayout(windowed))
    assert schedule.at(9).window_factor == 3.0 and schedule.at(9).borrow_into == {"agg": 40.0}
    assert schedule.at(5).window_factor is None       # an older generation's rounds
    assert schedule.at(6).legs["w1"][0].rate_mbps == 50.0   # its rates and round kept
    schedule.refresh(JobLayout(in_a_window(base, 80.0)))   # generation 1: not the latest
    assert schedule.at(9).borrow_into == {"agg": 40.0}


def test_a_daemon_takes_a_jobs_new_window_into_the_parts_it_serves():
    base = report(aggregated=True)
    daemon = JobDaemon(None, "agg")
    for loop in daemon.loops:
        loop.start()
    try:
        daemon.follow([base])
        parts = daemon.served[7][1]
        daemon.follow([in_a_window(base, 40.0)])
        assert daemon.served[7] == (1, parts)
        assert parts[0][0].rates.at(3).window_factor == 3.0
    finally:
        for job_id in list(daemon.served):
            daemon._drop(job_id)
        for loop in daemon.loops:
            loop.stop()


def test_a_worker_borrows_near_what_its_job_least_borrowing_worker_does():
    """w1 and w2 say they borrow 40 and 10 Mbit/s beyond floors of 100 each: both may
    borrow BORROW_SLACK times 10 (a fragment's sum waits for w2's part); w3, whose floor
    is twice theirs, twice that. Taken from every report, without a new generation; a
    report that says what no worker of the job borrows is not followed."""
    base = report()
    base["destinations"]["w3"][0]["rate_mbps"] = 200.0
    schedule = RateSchedule(JobLayout(base))
    assert schedule.at(3).borrow_cap("w1") is None   # none said yet
    schedule.refresh(JobLayout(dict(base, borrowed_by={"w1": 40.0, "w2": 10.0})))
    layout = schedule.at(3)
    assert layout.borrow_cap("w1") == layout.borrow_cap("w2") == BORROW_SLACK * 10.0
    assert layout.borrow_cap("w3") == BORROW_SLACK * 20.0
    for said in ({"w9": 1.0}, {"w1": -1.0}, {"w1": float("nan")}, ["w1"]):
        with pytest.raises(JobError, match="borrowed_by"):
            JobLayout(dict(base, borrowed_by=said))
