"""Scatter jobs (POST /jobs {"scatter": true}): a reduce-scatter through the rounds, the
gradient half of a round, each shard in its own worker and its sums kept there.
Planned (decisions/scatter_plan.py), booked, reported, taken back after a restart,
taking turns beside a gather job and released whole, in-process on fake switches; its
workers on loopback, on both data paths, with a lost batch repaired."""

import time
from concurrent.futures import wait

import numpy as np
import pytest

from syncfabric.decisions.scatter_plan import plan_scatter
from syncfabric.hosts.jobs.fabric_worker import FabricWorker
from syncfabric.hosts.jobs.job_layout import JobError, JobLayout
from syncfabric.hosts.jobs.worker_rounds import Round
from tests.harness.fabrics import spine_leaf_view
from tests.harness.fake_controller import job_across_a_restart
from tests.harness.in_process import NOTHING_LISTED, empty, listed, post, release_key
from tests.harness.loopback_jobs import loopback_job

WORKERS = ["h1", "h2", "h3"]   # h1, h2 on leaf1; h3 on leaf2 (20 Mbit/s links)
SCATTER_JOB = {"workers": WORKERS, "model_bytes": 300_000, "scatter": True}
GROUP_JOB = {"workers": WORKERS, "model_bytes": 300_000, "placement": "colocated",
             "aggregation": False}
FLOATS = 362 * 99   # 99 fragments, 33 a shard


def test_a_scatter_plan_sends_the_other_shards_parts_at_an_uplinks_rate():
    """Eight workers of 2x4x4, two on each leaf, no aggregators: each worker's uplink
    carries its parts of the seven other shards, so the round takes a ring
    reduce-scatter's time, (N-1)/N S/B: half an all-reduce round of the same shards."""
    view = spine_leaf_view(2, 4, 4, bw=20)
    workers = ["h%d" % i for i in (1, 2, 5, 6, 9, 10, 13, 14)]
    plan = plan_scatter(view, workers, 32.0)
    assert plan.pss == workers and plan.trees == []
    assert plan.gradients.split == pytest.approx({w: 1 / 8 for w in workers})
    assert plan.predicted_s == pytest.approx(7 / 8 * 32.0 / 20)
    assert plan.bound_s == pytest.approx(plan.predicted_s)
    assert plan.ring_s == pytest.approx(plan.predicted_s)


def test_a_scatter_job_has_a_shard_in_each_worker_and_no_return_trees(controller):
    code, job = post(controller, "/jobs", SCATTER_JOB)
    assert code == 201, job
    assert job["scatter"] is True and job["gather"] is False
    assert job["placement"] == "colocated" and job["trees"] == []
    assert [shard["host"] for shard in job["shards"]] == WORKERS
    assert all(shard["return"]["trees"] == [] for shard in job["shards"])
    counts = {shard["fragments"][1] - shard["fragments"][0] for shard in job["shards"]}
    assert len(counts) == 1   # each worker's slice as large as the others'
    assert {w: sorted(leg["shard"] for leg in legs) for w, legs in job["destinations"].items()} \
        == {w: [i for i in range(3) if WORKERS[i] != w] for w in WORKERS}
    # h3's uplink carries its parts of two shards: the round sends 3/2 of a link
    assert [shard["return"]["rate_mbps"] for shard in job["shards"]] == pytest.approx([10.0] * 3)
    JobLayout(job)   # its hosts take it as it is
    assert controller.request("DELETE", "/jobs/%d" % job["id"], headers=release_key(job))[0] == 200
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def test_a_scatter_job_comes_back_as_it_was_after_a_controller_restart():
    before, after = job_across_a_restart(SCATTER_JOB)
    assert after == before
    assert after["scatter"] is True


def test_a_group_job_takes_a_gather_job_and_a_scatter_job_one_of_each(controller):
    """A process group's all-reduce job has its gather job and its scatter job take turns
    with it, both released with it; a second scatter job for it is refused."""
    code, group = post(controller, "/jobs", GROUP_JOB)
    assert code == 201, group
    turns = {"turns_with": group["id"]}
    code, gather = post(controller, "/jobs", dict(SCATTER_JOB, scatter=False, gather=True,
                                                  **turns))
    assert code == 201, gather
    code, scatter = post(controller, "/jobs", dict(SCATTER_JOB, **turns))
    assert code == 201, scatter
    code, answer = post(controller, "/jobs", dict(SCATTER_JOB, **turns))
    assert code == 409 and "as its scatter job" in answer["error"], answer
    assert len(controller.request("GET", "/jobs")[1]["jobs"]) == 3
    assert controller.request("DELETE", "/jobs/%d" % group["id"],
                              headers=release_key(group))[0] == 200
    assert listed(controller) == NOTHING_LISTED and empty(controller)


@pytest.mark.parametrize("body, message", [
    (dict(SCATTER_JOB, scatter="yes"), "scatter must be true or false"),
    (dict(SCATTER_JOB, gather=True), "not both"),
    (dict(SCATTER_JOB, shards=2), "one shard in each worker"),
    (dict(SCATTER_JOB, placement="dedicated"), "one shard in each worker"),
    (dict(SCATTER_JOB, shard_hosts=["h4"]), "one shard in each worker"),
    (dict(SCATTER_JOB, shards=3, gradient_policy="equal-split"), "leave gradient_policy"),
    (dict(SCATTER_JOB, returns="unicast"), "leave gradient_policy and returns out"),
])
def test_a_scatter_job_asked_wrongly_gets_400_and_changes_nothing(controller, body, message):
    code, answer = post(controller, "/jobs", body)
    assert code == 400 and message in answer["error"], answer
    assert listed(controller) == NOTHING_LISTED and empty(controller)


@pytest.mark.parametrize("change", [
    lambda report: report["shards"][0]["return"]["trees"].append(
        {"tree": 1, "group": "239.1.1.1", "receivers": ["w2", "w3"]}),
    lambda report: report.update(shards=report["shards"][:2]),
    lambda report: report.update(gather=True),
])
def test_a_scatter_layout_that_is_not_one_is_refused(change):
    report = loopback_job(94, ["w1", "w2", "w3"], FLOATS * 4, 29880, scatter=True)
    change(report)
    with pytest.raises(JobError):
        JobLayout(report)


def own_slices(layout, floats):
    """Per float of a round, the worker whose shard sums it (by its index)."""
    per_fragment = layout.per_fragment
    blocks = np.arange(-(-floats // per_fragment))
    return layout.shard_of[layout.wire_of[blocks]].repeat(per_fragment)[:floats]


def drop_first_batch(node):
    """Make a shard node lose the first batch of datagrams it takes after this: as
    if the network dropped them."""
    take, lost = node.take, []

    def lossy():
        if lost:
            return take()
        lost.append(node.path.receive(node.sock).count)
        return 0
    node.take = lossy
    return lost


@pytest.mark.usefixtures("each_datapath")
@pytest.mark.parametrize("lose", [False, True])
def test_scatter_workers_each_get_their_own_shards_sums_and_no_others(lose):
    """Three workers of a scatter job on loopback: each worker's own shard's floats are
    the sum of everyone's, round after round; no sums travel, each worker sends only
    the other shards' parts, and a batch a shard lost is sent again once its senders
    ask whether the shard's round is whole."""
    names = ["w1", "w2", "w3"]
    report = loopback_job(95 + lose, names, FLOATS * 4, 28500 + 30 * lose, scatter=True)
    workers = [FabricWorker(report, name) for name in names]
    try:
        for worker in workers:
            worker.wait_served()
        lost = drop_first_batch(workers[1].own.nodes[0]) if lose else []
        owner = own_slices(workers[0].layout, FLOATS)
        for number in range(3):
            given = [np.arange(FLOATS, dtype=np.float32) % 1000 + 10 * k + number
                     for k in range(len(names))]
            futures = [w.allreduce_async(v) for w, v in zip(workers, given)]
            wait(futures, timeout=20)
            total = np.sum(given, axis=0)
            for k, future in enumerate(futures):
                assert np.array_equal(future.result()[owner == k], total[owner == k])
        deadline = time.monotonic() + 10   # a round's stats are filed once it is confirmed
        while not all(1 in w.stats for w in workers) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(w.stats[1]["sent"] == 66 for w in workers)   # the two others' 33 each
        if lose:
            assert lost and lost[0] > 0
            assert sum(w.stats[1]["resent"] for w in workers) >= lost[0]
        else:
            assert all(w.stats[1]["resent"] == 0 for w in workers)
    finally:
        for worker in workers:
            worker.close()


@pytest.mark.parametrize("shard, address, whole, confirmed", [
    (1, "127.0.0.12", [[0, 10 ** 9]], range(33, 66)),      # within its own range alone
    (1, "127.0.0.12", [[40, 42], [-5, 34]], [33, 40, 41]),
    (1, "127.0.0.13", [[33, 66]], []),                      # not that shard's host
    (7, "127.0.0.12", [[33, 66]], []),                      # no such shard
    (-1, "127.0.0.13", [[66, 99]], []),
    (1, "127.0.0.12", "all", []),                           # not ranges
    (1, "127.0.0.12", [[34, "x"], [35]], []),
])
def test_a_round_counts_as_confirmed_only_what_that_shards_host_says_of_its_own(
        shard, address, whole, confirmed):
    """Hostile answers: a confirmation counts only from the shard's own host, and only
    for fragments of its range, whatever ranges it names."""
    layout = JobLayout(loopback_job(97, ["w1", "w2", "w3"], FLOATS * 4, 28600, scatter=True))
    current = Round(1, layout, owed=layout.owed_to("w1"))
    current.confirm(shard, address, whole)
    assert np.flatnonzero(current.have).tolist() == list(confirmed)
    assert current.returned == len(confirmed)


def test_a_scatter_round_copies_a_whole_rounds_values_it_may_send_after_its_future():
    """An all-reduce round reads a whole round's values where they are, until its
    Future ends; a scatter round may send them again after it (until the other shards
    confirm them), so it keeps a copy."""
    layout = JobLayout(loopback_job(98, ["w1", "w2", "w3"], FLOATS * 4, 28700, scatter=True))
    values = np.arange(FLOATS, dtype=np.float32)
    current = Round(1, layout, owed=layout.owed_to("w1"))
    current.contribute(0, values, None, list(range(layout.count)))
    assert current.values is not values and np.array_equal(current.values, values)
    plain = Round(1, layout)
    plain.contribute(0, values, None, list(range(layout.count)))
    assert plain.values is values
