"""The jobs service in-process on fake switches: a streaming round's shards, return trees
and gradient plan are admitted all or none, refused with their bottleneck, followed
through a failed link as one, and leave nothing when released, deleted or expired."""

import time

import pytest
from ryu.lib import hub

from apps import job_controller
from syncfabric.openflow import steering_messages as steering
from syncfabric.services.job_parts import release_parts
from tests.harness.fake_controller import InProcessController, description
from tests.harness.in_process import (NOTHING_LISTED, empty, listed, post, release_key,
                                      stream_paths)

JOB = {"workers": ["h1", "h2", "h3"], "model_bytes": 1_000_000}


def covered(job):
    """{worker: {shard: sorted fragments it sends}}: where every fragment goes."""
    return {w: {i: sorted(f for leg in legs if leg["shard"] == i for f in range(*leg["fragments"]))
                for i in range(len(job["shards"]))} for w, legs in job["destinations"].items()}


def test_a_job_is_admitted_whole_and_released_whole(controller):
    code, job = post(controller, "/jobs", JOB)
    assert code == 201, job
    # auto puts 3 shards in the workers' hosts: 693 fragments share out among them
    assert (job["id"], job["generation"], job["fragments"]) == (1, 1, 693)
    assert job["shards"][0]["bytes"][0] == 0 and job["shards"][-1]["bytes"][1] == 1_000_000
    assert [s["fragments"][0] for s in job["shards"][1:]] == [s["fragments"][1] for s in job["shards"][:-1]]
    for worker, shards in covered(job).items():   # every fragment once, but a shard's own host's
        for index, fragments in shards.items():
            own = job["shards"][index]["host"] == worker
            assert fragments == ([] if own else list(range(*job["shards"][index]["fragments"])))
    for aggregator in job["aggregators"]:
        assert all(leg["host"] == aggregator["host"] for w in aggregator["workers"]
                   for leg in job["destinations"][w] if leg["fragments"] == aggregator["workers"][w])
    lists = listed(controller)
    assert [t["id"] for t in lists["trees"]] == job["trees"] == [t["tree"] for s in job["shards"]
                                                             for t in s["return"]["trees"]]
    assert [p["id"] for p in lists["plans"]] == [job["plan"]]
    assert [t["bandwidth_mbps"] for t in lists["trees"]] == [s["return"]["rate_mbps"]
                                                             for s in job["shards"]]
    assert job["predicted_round_s"] >= job["lower_bound_s"] > 0
    assert controller.request("GET", "/jobs")[1]["jobs"] == [{k: v for k, v in job.items()
                                                              if k != "release_key"}]
    # the parts are the job's: no client deletes one alone
    assert controller.request("DELETE", "/multicast/trees/%d" % job["trees"][0],
                              headers=release_key(job))[0] == 403
    assert controller.request("DELETE", "/jobs/1", headers={"X-Release-Key": "other"})[0] == 403
    assert controller.request("DELETE", "/jobs/1", headers=release_key(job))[0] == 200
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    assert controller.request("GET", "/jobs/1")[0] == 404


@pytest.mark.parametrize("shards, placement, aggregation", [
    (1, "dedicated", True), (2, "colocated", False), ("auto", "auto", True),
    (2, "in-network", True), ("auto", "auto", False)])
def test_a_job_takes_the_shards_placement_and_aggregation_asked_for(controller, shards, placement,
                                                                   aggregation):
    code, job = post(controller, "/jobs", dict(JOB, shards=shards, placement=placement,
                                               aggregation=aggregation))
    assert code == 201, job
    if shards != "auto":
        assert len(job["shards"]) == shards and job["placement"] == placement
    # in-network: each shard summed in a spine's aggregator, and the report says so
    on_aggregators = {s["host"].startswith("agg-spine") for s in job["shards"]}
    assert on_aggregators == {job["placement"] == "in-network"}
    if not aggregation or placement == "in-network":
        assert job["aggregators"] == [] and all(
            leg["host"] == job["shards"][leg["shard"]]["host"]
            for legs in job["destinations"].values() for leg in legs)
    controller.request("DELETE", "/jobs/%d" % job["id"], headers=release_key(job))
    assert empty(controller)


def test_a_job_of_jumbo_frames_fills_them_as_far_as_its_shards_hold_as_many(controller):
    code, job = post(controller, "/jobs", dict(JOB, mtu=9000, shards=3, placement="colocated"))
    assert code == 201, job
    # 1 MB is 112 fragments of 9000 - 52 bytes; 114 of 8772 share out among 3 shards
    assert (job["fragment_bytes"], job["fragments"]) == (8772, 114)
    assert [s["fragments"] for s in job["shards"]] == [[0, 38], [38, 76], [76, 114]]
    assert job["shards"][-1]["bytes"][1] == 1_000_000
    assert [s["bytes"][0] for s in job["shards"]] == [s["fragments"][0] * 8772 for s in job["shards"]]
    controller.request("DELETE", "/jobs/%d" % job["id"], headers=release_key(job))
    assert empty(controller)


@pytest.mark.parametrize("body, message", [
    (dict(JOB, workers=["h1", "h99"]), "unknown host(s): h99"),
    (dict(JOB, workers=["h1", "agg-spine1"]), "aggregator host(s) cannot be workers"),
    (dict(JOB, workers=["h1"]), "2 to 64 distinct host names"),
    (dict(JOB, model_bytes=1.5), "model_bytes"),
    (dict(JOB, shards=0), "shards"),
    (dict(JOB, placement="anywhere"), "placement"),
    (dict(JOB, aggregation="yes"), "aggregation"),
    (dict(JOB, ttl_s=-1), "ttl_s"),
    (dict(JOB, mtu=9001), "mtu must be the hosts' data-plane MTU"),
    (dict(JOB, mtu="9000"), "mtu"),
    (dict(JOB, owner="me"), "unknown field(s): owner"),
    ({"workers": ["h1", "h2"]}, "missing field(s): model_bytes"),
])
def test_a_bad_job_gets_400_and_changes_nothing(controller, body, message):
    code, answer = post(controller, "/jobs", body)
    assert code == 400 and message in answer["error"], answer
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def test_a_job_that_does_not_fit_gets_409_naming_its_bottleneck_and_changes_nothing(controller):
    _, hog = post(controller, "/multicast/trees", {"source": "h4", "receivers": ["h1"],
                                                   "bandwidth_mbps": 20})
    code, answer = post(controller, "/jobs", JOB)
    assert code == 409, answer
    assert (answer["bottleneck"], answer["max_rate_mbps"]) == ("leaf1->h1", 0.0)
    assert "leaf1->h1" in answer["error"]
    assert [t["id"] for t in listed(controller)["trees"]] == [hog["id"]]
    controller.request("DELETE", "/multicast/trees/%d" % hog["id"], headers=release_key(hog))
    assert empty(controller)


def test_a_tree_above_a_link_by_any_amount_is_refused(controller):
    code, answer = post(controller, "/multicast/trees", {"source": "h1", "receivers": ["h3"],
                                                         "bandwidth_mbps": 20.0000001})
    assert code == 409 and answer["max_feasible_mbps"] == 20.0, answer
    assert empty(controller)


def test_a_job_whose_plan_a_switch_rejects_leaves_nothing(controller):
    for datapath in controller.switches.values():
        datapath.reject = lambda message: (type(message).__name__ == "OFPFlowMod"
                                           and message.cookie == steering.steering_cookie(1))
    code, answer = post(controller, "/jobs", JOB)
    assert code == 500 and "rejected the plan" in answer["error"], answer
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    assert controller.request("GET", "/jobs")[1] == {"jobs": []}


def test_a_job_deleted_while_admitted_leaves_nothing_and_the_post_says_so(controller):
    deletes = []

    def delete_while_installing(_datapath, message):
        jobs = controller.services.jobs
        if not deletes and type(message).__name__ == "OFPBarrierReply" and jobs.jobs:
            deletes.append(hub.spawn(jobs.release, 1, time.monotonic()))
    controller.network.before_answer = delete_while_installing
    code, answer = post(controller, "/jobs", JOB)
    assert code == 409 and "released while being admitted" in answer["error"], answer
    assert deletes[0].wait() == {"id": 1}
    controller.settle()
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def crossing(job_parts, link):
    trees, plan = job_parts
    pairs = {tuple(edge) for tree in trees for edge in tree["edges"]}
    pairs |= {(p[i], p[i + 1]) for p in stream_paths(plan).values() for i in range(len(p) - 1)}
    return bool(pairs & {link, link[::-1]})


def parts(controller, job):
    return ([controller.request("GET", "/multicast/trees/%d" % i)[1] for i in job["trees"]],
            controller.request("GET", "/ina/plans/%d" % job["plan"])[1])


def test_a_host_polling_the_jobs_gets_304_until_a_job_changes(controller):
    def poll(etag):
        answer = controller.response("GET", "/jobs", headers={"If-None-Match": etag})
        assert answer.headers["Cache-Control"] == "no-store"
        return answer.status_int, answer.headers["ETag"], answer.body

    _, none, _ = poll("")
    assert poll(none) == (304, none, b"")
    _, job = post(controller, "/jobs", dict(JOB, ttl_s=30))
    code, one, body = poll(none)
    assert code == 200 and one != none and b'"id": %d' % job["id"] in body
    assert poll(one)[0] == 304
    controller.request("PUT", "/jobs/%d/lease" % job["id"], {"ttl_s": 60}, release_key(job))
    code, renewed, _ = poll(one)
    assert code == 200 and renewed != one and poll(renewed)[0] == 304
    jobs = controller.services.jobs
    jobs.jobs[job["id"]].parts_seen = None   # as if its parts had moved
    jobs.follow(time.monotonic())
    code, moved, _ = poll(renewed)
    assert code == 200 and moved != renewed
    controller.request("DELETE", "/jobs/%d" % job["id"], headers=release_key(job))
    assert poll(moved)[:2] == (200, none)


def test_a_failed_link_moves_the_jobs_trees_and_plan_as_one_generation(controller):
    code, job = post(controller, "/jobs", dict(JOB, placement="dedicated", shards=1))
    assert code == 201, job
    link = next(("leaf1", s) for s in ("spine1", "spine2") if crossing(parts(controller, job),
                                                                     ("leaf1", s)))
    jobs = controller.services.jobs
    # the timer, at every message a switch answers while the parts move
    controller.network.before_answer = lambda _datapath, _message: jobs.follow(time.monotonic())
    controller.port_down(*link)
    controller.settle_until(lambda: not crossing(parts(controller, job), link))
    jobs.follow(time.monotonic())
    _, moved = controller.request("GET", "/jobs/%d" % job["id"])
    assert moved["generation"] == 2   # once for both parts
    assert (moved["trees"], moved["plan"], moved["shards"]) == (job["trees"], job["plan"], job["shards"])
    controller.request("DELETE", "/jobs/%d" % job["id"], headers=release_key(job))
    assert empty(controller)


def test_the_generation_goes_up_only_once_every_part_has_settled(controller):
    _, job = post(controller, "/jobs", JOB)
    jobs, trees = controller.services.jobs, controller.services.trees
    jobs.jobs[job["id"]].parts_seen = None    # as if one part had moved ...
    trees.moving.add(job["trees"][0])         # ... while another still moves
    jobs.follow(time.monotonic())
    assert controller.request("GET", "/jobs/1")[1]["generation"] == 1
    trees.moving.clear()
    jobs.follow(time.monotonic())
    assert controller.request("GET", "/jobs/1")[1]["generation"] == 2


def test_a_job_that_loses_a_part_is_released_whole(controller):
    _, job = post(controller, "/jobs", dict(JOB, placement="dedicated", shards=1))
    controller.port_down("leaf1", "spine1")
    controller.port_down("leaf1", "spine2")   # h1 and h2 are cut off: nothing fits
    controller.settle_until(lambda: not controller.services.plans.plans)
    controller.services.jobs.follow(time.monotonic())
    controller.settle()
    assert controller.request("GET", "/jobs")[1] == {"jobs": []}
    assert listed(controller) == NOTHING_LISTED


def test_the_lease_releases_the_whole_job(controller):
    _, job = post(controller, "/jobs", dict(JOB, ttl_s=30))
    assert 29 < job["expires_in_s"] <= 30
    controller.services.jobs.follow(time.monotonic() + 10)
    assert controller.request("GET", "/jobs/%d" % job["id"])[0] == 200
    controller.services.jobs.follow(time.monotonic() + 31)
    controller.settle()
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    assert controller.request("GET", "/jobs/%d" % job["id"])[1]["released"] == "its lease ran out"
    assert b'syncfabric_releases_total{cause="lease",resource="jobs"} 1.0' in \
        controller.services.metrics.exposition()


def test_a_job_whose_daemon_stops_polling_is_released_and_says_why(controller):
    """Its shard's host polled GET /jobs?host=, then fell silent for the lease time;
    a daemon that never polled is left to the workers' hello."""
    _, job = post(controller, "/jobs", dict(JOB, placement="dedicated", shards=1, ttl_s=None))
    shard_host = job["shards"][0]["host"]
    assert shard_host not in JOB["workers"]
    jobs, path = controller.services.jobs, "/jobs/%d" % job["id"]
    jobs.follow(time.monotonic() + 60)   # no daemon has polled yet: nothing is said
    assert controller.request("GET", path)[0] == 200
    assert controller.request("GET", "/jobs?host=%s" % shard_host)[0] == 200
    jobs.follow(time.monotonic() + 20)   # silent for less than 30 s
    assert controller.request("GET", path)[0] == 200
    jobs.follow(time.monotonic() + 31)
    controller.settle()
    code, answer = controller.request("GET", path)
    assert code == 404 and answer["released"] == "daemon on %s stopped answering" % shard_host
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    assert b'syncfabric_releases_total{cause="daemon",resource="jobs"} 1.0' in \
        controller.services.metrics.exposition()


def test_the_owner_renews_the_lease_and_the_job_outlives_its_first_one(controller):
    _, job = post(controller, "/jobs", dict(JOB, ttl_s=30))
    lease = "/jobs/%d/lease" % job["id"]
    for body, headers, status in (({"ttl_s": 60}, {}, 403), ({"ttl_s": -1}, release_key(job), 400),
                                  ({"ttl_s": "60"}, release_key(job), 400), ({}, release_key(job), 400),
                                  ({"ttl_s": 60, "x": 1}, release_key(job), 400)):
        code, answer = controller.request("PUT", lease, body, headers)
        assert code == status, answer
        assert 29 < controller.request("GET", "/jobs/%d" % job["id"])[1]["expires_in_s"] <= 30
    assert controller.request("PUT", "/jobs/99/lease", {"ttl_s": 60}, release_key(job))[0] == 404
    code, renewed = controller.request("PUT", lease, {"ttl_s": 60}, release_key(job))
    assert code == 200 and renewed["ttl_s"] == 60 and 59 < renewed["expires_in_s"] <= 60
    (saved,) = controller.services.store.saved["jobs"]["jobs"]
    assert 59 < saved["expires_in_s"] <= 60   # a restart keeps the renewed lease
    controller.services.jobs.follow(time.monotonic() + 45)   # past the first lease
    assert controller.request("GET", "/jobs/%d" % job["id"])[0] == 200
    controller.services.jobs.follow(time.monotonic() + 61)
    controller.settle()
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def test_a_lease_renewed_to_null_never_runs_out(controller):
    _, job = post(controller, "/jobs", dict(JOB, ttl_s=30))
    code, renewed = controller.request("PUT", "/jobs/%d/lease" % job["id"], {"ttl_s": None},
                                       release_key(job))
    assert code == 200 and renewed["ttl_s"] is None and renewed["expires_in_s"] is None
    controller.services.jobs.follow(time.monotonic() + 10 ** 6)
    assert controller.request("GET", "/jobs/%d" % job["id"])[0] == 200


def test_a_restarted_controller_takes_its_jobs_back_with_their_keys_and_leases():
    first = InProcessController(description(hosts_per_leaf=3))
    try:
        _, job = post(first, "/jobs", dict(JOB, workers=["h1", "h4"], placement="colocated",
                                           ttl_s=300))
        _, lost = post(first, "/jobs", dict(JOB, workers=["h2", "h5"], placement="colocated"))
        # the second job shares the first one's links: its report as the switches kept it
        kept = first.request("GET", "/jobs/%d" % job["id"])[1]
        saved = first.services.store.saved
    finally:
        first.close()
    # the second job's plan did not survive (as if its state file lost it)
    saved["ina"]["plans"] = [p for p in saved["ina"]["plans"] if p["id"] != lost["plan"]]
    restarted = InProcessController(store=type(first.services.store)(saved))
    try:
        # until the saved jobs are back, none is answered for: a daemon told "no jobs"
        # would stop serving the jobs whose flows the switches kept (the app's timer, which
        # takes them back, is held meanwhile: a slow first request let it fire in CI)
        restarted.services.jobs.follow = lambda now: None
        for method, path, body in (("GET", "/jobs", None), ("GET", "/jobs/%d" % job["id"], None),
                                   ("PUT", "/jobs/%d/lease" % job["id"], {"ttl_s": 9})):
            assert restarted.request(method, path, body, release_key(job))[0] == 503
        assert "ETag" not in restarted.response("GET", "/jobs").headers   # no list to name
        del restarted.services.jobs.follow
        restarted.connect_all()
        restarted.services.jobs.follow(time.monotonic())
        restarted.settle()
        code, back = restarted.request("GET", "/jobs/%d" % job["id"])
        assert code == 200 and 0 < back.pop("expires_in_s") <= 300
        # all as saved, but the share now that the lost job is gone
        live = ("expires_in_s", "fair_share_mbps", "bound_by")
        assert {k: v for k, v in back.items() if k not in live} \
            == {k: v for k, v in kept.items() if k not in live}
        assert restarted.request("GET", "/jobs/%d" % lost["id"])[0] == 404   # released whole
        assert [t["id"] for t in listed(restarted)["trees"]] == job["trees"]
        assert restarted.request("DELETE", "/jobs/%d" % job["id"], headers=release_key(job))[0] == 200
        assert listed(restarted) == NOTHING_LISTED and empty(restarted)
        _, another = post(restarted, "/jobs", dict(JOB, workers=["h1", "h4"]))
        assert another["id"] > lost["id"]   # ids are not reused
    finally:
        restarted.close()


def test_undoing_a_job_of_a_replaced_fabric_leaves_the_new_fabrics_trees_alone(controller):
    _, job = post(controller, "/jobs", JOB)
    old = controller.services.jobs.jobs[job["id"]]
    controller.request("PUT", "/fabric/topology", description())   # a reload: ids start again
    controller.connect_all()
    assert controller.request("GET", "/jobs")[1] == {"jobs": []}
    _, tree = post(controller, "/multicast/trees", {"source": "h1", "receivers": ["h2"],
                                                    "bandwidth_mbps": 1})
    assert tree["id"] in old.tree_ids
    # what an admission that straddled the reload does when it finds itself released
    services = controller.services
    release_parts(old, services.trees, services.plans, time.monotonic())
    controller.settle()
    assert [t["id"] for t in listed(controller)["trees"]] == [tree["id"]]


def test_a_job_that_lost_a_part_is_left_out_of_the_list_until_it_is_released(monkeypatch):
    # the test is the timer: the app's would release the job between two requests
    monkeypatch.setattr(job_controller, "FOLLOW_INTERVAL_S", 3600)
    controller = InProcessController(description(hosts_per_leaf=3))
    try:
        _, job = post(controller, "/jobs", dict(JOB, workers=["h1", "h4"], placement="colocated"))
        _, other = post(controller, "/jobs", dict(JOB, workers=["h2", "h5"], placement="colocated"))
        controller.services.plans.release(job["plan"], time.monotonic())   # as if nothing fit
        hub.sleep(0.6)   # longer than the app's own interval
        code, listing = controller.request("GET", "/jobs")
        assert code == 200 and [j["id"] for j in listing["jobs"]] == [other["id"]]
        code, answer = controller.request("GET", "/jobs/%d" % job["id"])
        assert code == 404 and "lost a part" in answer["error"]
        controller.services.jobs.follow(time.monotonic())
        controller.settle()
        assert [t["id"] for t in listed(controller)["trees"]] == other["trees"]
    finally:
        controller.close()


def test_an_auto_job_on_roomy_aggregators_has_its_shards_there_and_says_so():
    controller = InProcessController(description(aggregator_bw=80))
    try:
        code, job = post(controller, "/jobs", JOB)
        assert code == 201 and job["placement"] == "in-network", job
        assert all(shard["host"].startswith("agg-spine") for shard in job["shards"])
        assert job["predicted_round_s"] == pytest.approx(job["lower_bound_s"])
        controller.request("DELETE", "/jobs/%d" % job["id"], headers=release_key(job))
        assert listed(controller) == NOTHING_LISTED and empty(controller)
    finally:
        controller.close()
