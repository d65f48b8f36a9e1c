"""Gather jobs (POST /jobs {"gather": true}): an all-gather through the rounds, each
shard in its own worker and its sums that worker's values, with no gradients sent.
Planned (decisions/gather_plan.py), booked, reported, taken back after a restart and
released whole, in-process on fake switches; its workers on loopback, on both data
paths."""

import time
from concurrent.futures import wait

import numpy as np
import pytest

from syncfabric.decisions.gather_plan import plan_gather
from syncfabric.hosts.jobs.fabric_worker import FabricWorker
from tests.harness.fabrics import spine_leaf_view
from tests.harness.fake_controller import job_across_a_restart
from tests.harness.in_process import NOTHING_LISTED, empty, listed, post, release_key
from tests.harness.loopback_jobs import loopback_job

WORKERS = ["h1", "h2", "h3"]   # h1, h2 on leaf1; h3 on leaf2 (20 Mbit/s links)
GATHER_JOB = {"workers": WORKERS, "model_bytes": 300_000, "gather": True}
FLOATS = 362 * 99   # 99 fragments, 33 a shard


def test_a_gather_plan_rates_each_tree_at_a_downlink_over_the_others():
    """Eight workers of 2x4x4, two on each leaf: every downlink takes seven trees, so each
    runs at B/7 and the round takes a ring all-gather's time, (N-1)/N S/B."""
    view = spine_leaf_view(2, 4, 4, bw=20)
    workers = ["h%d" % i for i in (1, 2, 5, 6, 9, 10, 13, 14)]
    plan = plan_gather(view, workers, 32.0)
    assert plan.pss == workers and plan.gradients.legs == {}
    assert [tree.bandwidth_mbps for tree in plan.trees] == pytest.approx([20 / 7] * 8)
    assert [tree.source for tree in plan.trees] == workers
    assert plan.predicted_s == pytest.approx(7 / 8 * 32.0 / 20)
    assert plan.bound_s == pytest.approx(plan.predicted_s)


def test_a_gather_job_has_a_shard_in_each_worker_and_no_gradients(controller):
    code, job = post(controller, "/jobs", GATHER_JOB)
    assert code == 201, job
    assert job["gather"] is True and job["placement"] == "colocated"
    assert [shard["host"] for shard in job["shards"]] == WORKERS
    assert job["destinations"] == {w: [] for w in WORKERS} and job["aggregators"] == []
    counts = {shard["fragments"][1] - shard["fragments"][0] for shard in job["shards"]}
    assert len(counts) == 1   # each worker's slice as large as the others'
    rates = [shard["return"]["rate_mbps"] for shard in job["shards"]]
    assert rates == pytest.approx([10.0] * 3)   # h1's downlink takes h2's and h3's trees
    assert [tree["receivers"] for shard in job["shards"] for tree in shard["return"]["trees"]] \
        == [[w for w in WORKERS if w != shard["host"]] for shard in job["shards"]]
    assert controller.request("DELETE", "/jobs/%d" % job["id"], headers=release_key(job))[0] == 200
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def test_a_gather_job_comes_back_as_it_was_after_a_controller_restart():
    before, after = job_across_a_restart(GATHER_JOB)
    assert after == before
    assert after["gather"] is True and after["destinations"] == {w: [] for w in WORKERS}


@pytest.mark.parametrize("body, message", [
    (dict(GATHER_JOB, gather="yes"), "gather must be true or false"),
    (dict(GATHER_JOB, shards=2), "one shard in each worker"),
    (dict(GATHER_JOB, placement="dedicated"), "one shard in each worker"),
    (dict(GATHER_JOB, shard_hosts=["h4"]), "one shard in each worker"),
    (dict(GATHER_JOB, aggregation=True), "no gradients"),
    (dict(GATHER_JOB, shards=3, gradient_policy="equal-split"), "no gradients"),
])
def test_a_gather_job_asked_wrongly_gets_400_and_changes_nothing(controller, body, message):
    code, answer = post(controller, "/jobs", body)
    assert code == 400 and message in answer["error"], answer
    assert listed(controller) == NOTHING_LISTED and empty(controller)


@pytest.mark.usefixtures("each_datapath")
def test_gather_workers_each_get_every_shards_own_workers_values():
    """Three workers of a gather job on loopback: the fragments of shard i come back to
    every worker as worker i's values, round after round, and no worker sends another
    shard a gradient."""
    names = ["w1", "w2", "w3"]
    report = loopback_job(91, names, FLOATS * 4, 29760, gather=True)
    workers = [FabricWorker(report, name) for name in names]
    try:
        layout = workers[0].layout
        owner = layout.shard_of[layout.wire_of[np.arange(FLOATS // 362)]].repeat(362)
        for number in range(3):
            given = [np.arange(FLOATS, dtype=np.float32) % 1000 + 10 * k + number
                     for k in range(len(names))]
            futures = [w.allreduce_async(v) for w, v in zip(workers, given)]
            wait(futures, timeout=20)
            expected = np.choose(owner, given)
            for future in futures:
                assert np.array_equal(future.result(), expected)
        assert all(w.stats[1]["resent"] == 0 for w in workers)
    finally:
        for worker in workers:
            worker.close()


@pytest.mark.usefixtures("each_datapath")
def test_a_gather_worker_keeps_the_slices_of_a_rank_ahead_before_it_gives_that_round():
    """w1 gives rounds 1 and 2 before w2 and w3 begin either: its shard sends its slices
    at once, and w2 and w3 hold them in rounds opened ahead (a round not open dropped
    them, and every datagram of them was asked for again); then every round is exact."""
    names = ["w1", "w2", "w3"]
    report = loopback_job(92, names, FLOATS * 4, 29790, gather=True)
    workers = [FabricWorker(report, name) for name in names]
    try:
        layout = workers[0].layout
        first = layout.shards[0]   # w1's shard
        given = {(k, number): np.arange(FLOATS, dtype=np.float32) % 1000 + 10 * k + number
                 for k in range(3) for number in (1, 2)}
        futures = {(0, number): workers[0].allreduce_async(given[0, number]) for number in (1, 2)}

        def held(worker, number):   # what worker holds of round `number`, by fragment
            current = worker.rounds.get(number)
            return np.zeros(layout.count, dtype=bool) if current is None else current.have
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
                held(w, number)[first.first:first.last].all()
                for w in workers[1:] for number in (1, 2)):
            time.sleep(0.01)
        for w in workers[1:]:
            for number in (1, 2):
                assert held(w, number)[first.first:first.last].all()
                assert not held(w, number)[first.last:].any()   # nothing given yet
        futures.update({(k, number): workers[k].allreduce_async(given[k, number])
                        for k in (1, 2) for number in (1, 2)})
        wait(list(futures.values()), timeout=20)
        owner = layout.shard_of[layout.wire_of[np.arange(FLOATS // 362)]].repeat(362)
        for (k, number), future in futures.items():
            expected = np.choose(owner, [given[j, number] for j in range(3)])
            assert np.array_equal(future.result(), expected)
    finally:
        for worker in workers:
            worker.close()
