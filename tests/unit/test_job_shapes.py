"""Jobs in the papers' shapes, in-process on fake switches: one PS named in the request,
the gradients straight to it or summed on the way (GRID's plan), and the sums returned
by multicast (one tree) or by unicast (a tree of one receiver per worker, so the PS
sends each sum once per worker). Each is planned, booked and released whole."""

import pytest

from tests.harness.fake_controller import InProcessController, description
from tests.harness.in_process import NOTHING_LISTED, empty, listed, post, release_key

WORKERS = ["h1", "h2", "h3"]
PS = "h4"   # on leaf2, beside h3
PAPERS_JOB = {"workers": WORKERS, "model_bytes": 1_000_000, "shard_hosts": [PS]}


def booked(controller):
    """{(tail, head): Mbit/s} the fabric's book holds now."""
    return {edge: mbps for edge, mbps in controller.services.fabric.book.reserved_mbps.items()
            if mbps > 0}


@pytest.mark.parametrize("returns, aggregation", [
    ("unicast", False), ("multicast", False), ("multicast", True), ("unicast", True)])
def test_a_papers_job_has_its_ps_its_returns_and_its_gradients_as_asked(controller, returns,
                                                                       aggregation):
    code, job = post(controller, "/jobs", dict(PAPERS_JOB, returns=returns,
                                               aggregation=aggregation))
    assert code == 201, job
    assert [s["host"] for s in job["shards"]] == [PS] and job["placement"] == "dedicated"
    assert (job["returns"], job["aggregation"]) == (returns, aggregation)
    (shard,) = job["shards"]
    trees = shard["return"]["trees"]
    if returns == "unicast":   # a tree to each worker alone, all at the shard's rate
        assert sorted(r for tree in trees for r in tree["receivers"]) == WORKERS
        assert all(len(tree["receivers"]) == 1 for tree in trees)
    else:
        assert [tree["receivers"] for tree in trees] == [WORKERS]
    assert len({tree["group"] for tree in trees}) == len(trees)
    listed_trees = listed(controller)["trees"]
    assert [t["id"] for t in listed_trees] == job["trees"] == [tree["tree"] for tree in trees]
    assert {t["bandwidth_mbps"] for t in listed_trees} == {shard["return"]["rate_mbps"]}
    # the PS's uplink carries one copy per tree; its downlink the gradients
    rate = shard["return"]["rate_mbps"]
    assert booked(controller)[PS, "leaf2"] == pytest.approx(rate * len(trees))
    if not aggregation:
        assert job["aggregators"] == [] and all(
            leg["host"] == PS for legs in job["destinations"].values() for leg in legs)
    assert controller.request("DELETE", "/jobs/%d" % job["id"], headers=release_key(job))[0] == 200
    assert listed(controller) == NOTHING_LISTED and empty(controller)


@pytest.fixture
def roomy_aggregators():
    """The fabric with aggregators of 40 Mbit/s: h1's and h2's gradients summed in one
    reach the PS as one stream, beside h3's."""
    controller = InProcessController(description(aggregator_bw=40))
    yield controller
    controller.close()


def test_returning_by_unicast_is_slower_where_the_ps_uplink_carries_every_copy(
        roomy_aggregators):
    """Summed on the way, the gradients reach the PS at 13.3 Mbit/s; three unicast copies
    of the sums share its 20 Mbit/s uplink, 6.7 Mbit/s each."""
    controller, rounds = roomy_aggregators, {}
    for returns in ("multicast", "unicast"):
        code, job = post(controller, "/jobs", dict(PAPERS_JOB, returns=returns))
        assert code == 201, job
        rounds[returns] = job["predicted_round_s"]
        rate = job["shards"][0]["return"]["rate_mbps"]
        controller.request("DELETE", "/jobs/%d" % job["id"], headers=release_key(job))
        if returns == "unicast":
            assert rate * 3 == pytest.approx(20.0, rel=1e-6)
    assert rounds["unicast"] > 1.3 * rounds["multicast"]


@pytest.mark.parametrize("policy, shards", [("nearest", ["h4"]), ("no-ina", ["h4"]),
                                            ("inart", ["h3", "h4"]), ("lbmm", ["h3", "h4"])])
def test_a_job_that_names_its_gradients_policy_is_planned_by_it(controller, policy, shards):
    workers = ["h1", "h2"] if len(shards) > 1 else WORKERS
    code, job = post(controller, "/jobs", dict(PAPERS_JOB, workers=workers, shard_hosts=shards,
                                               gradient_policy=policy))
    assert code == 201, job
    plan = controller.request("GET", "/ina/plans/%d" % job["plan"])[1]
    assert plan["policy"] == policy and [s["host"] for s in job["shards"]] == shards
    # each shard's trees run at its share of the gradients' rate
    for shard in job["shards"]:
        assert shard["return"]["rate_mbps"] == pytest.approx(
            plan["theta_mbps"] * plan["split"][shard["host"]], rel=1e-6)
    controller.request("DELETE", "/jobs/%d" % job["id"], headers=release_key(job))
    assert listed(controller) == NOTHING_LISTED and empty(controller)


@pytest.mark.parametrize("body, message", [
    (dict(PAPERS_JOB, gradient_policy="fastest"), "gradient_policy must be null"),
    (dict(PAPERS_JOB, shard_hosts=None, gradient_policy="grid"), "give shards or shard_hosts"),
    (dict(PAPERS_JOB, shard_hosts=["h4", "h5"], workers=["h1", "h2"], gradient_policy="grid"),
     "plans for one PS; for 2 shards use one of"),
    (dict(PAPERS_JOB, returns="broadcast"), "returns must be multicast or unicast"),
    (dict(PAPERS_JOB, shard_hosts=["h3"]), "not workers or aggregators: h3"),
    (dict(PAPERS_JOB, shard_hosts=["agg-spine1"]), "not workers or aggregators: agg-spine1"),
    (dict(PAPERS_JOB, shard_hosts=["h99"]), "unknown host(s): h99"),
    (dict(PAPERS_JOB, shard_hosts=[]), "shard_hosts must be null"),
    (dict(PAPERS_JOB, shard_hosts=["h4", "h4"]), "shard_hosts must be null"),
    (dict(PAPERS_JOB, shards=2), "shards is 2 but shard_hosts names 1 host(s)"),
    (dict(PAPERS_JOB, placement="colocated"), "placement must be dedicated"),
])
def test_a_papers_job_asked_wrongly_gets_400_and_changes_nothing(controller, body, message):
    code, answer = post(controller, "/jobs", body)
    assert code == 400 and message in answer["error"], answer
    assert listed(controller) == NOTHING_LISTED and empty(controller)
