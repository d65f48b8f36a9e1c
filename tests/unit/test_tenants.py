"""Many jobs on one fabric (services/tenants.py), through the fake datapath: under the
fair policy a new job is admitted at its share and the job it shares with moves down
make-before-break (told first, its meters tightened once its workers reached the
round its new rates hold from); a release grows it back; a job whose minimum cannot be
met is refused and changes nothing; weights divide what is shared."""

import time

import pytest
from ryu.lib import hub

from syncfabric.decisions import round_planner
from syncfabric.decisions.multicast_trees import switch_shares
from syncfabric.decisions.phase_schedule import PERIOD_MARGIN
from syncfabric.decisions.plan_admission import plan_shares
from syncfabric.openflow import builders as of
from syncfabric.openflow import steering_messages as steering
from syncfabric.services.job_rounds import EFFECTIVE_MARGIN
from syncfabric.traffic_classes import BORROWED_DSCP
from tests.harness.fake_controller import connected, description
from tests.harness.in_process import empty, post, release_key

COLOCATED = {"model_bytes": 4_000_000, "placement": "colocated", "aggregation": False}
FIRST, SECOND = ["h1", "h3"], ["h2", "h4"]   # both cross the one spine


@pytest.fixture
def one_spine():
    """2 leaves under one spine, 2 hosts each, 20 Mbit/s links."""
    yield from connected(description(spines=1))


def meter_rates(controller):
    """{(switch, meter id): kbit/s} of every meter on the fake switches."""
    return {(name, meter_id): bands[0].rate for name, table in controller.tables().items()
            for meter_id, (_flags, bands) in table.meters.items()}


def booked_meters(controller):
    """{(switch, meter id): kbit/s} the live plans and trees should have on the switches."""
    services, expected = controller.services, {}
    view = services.fabric.view
    for live in services.plans.plans.values():
        for switch, share in plan_shares(view, live.request, live.result,
                                         live.report["ports"]).items():
            for stream, rate in share.meters.items():
                expected[switch, steering.steering_meter_id(live.id, stream)] = of.meter_rate_kbps(rate)
    for reservation in services.trees.book:
        for switch, share in switch_shares(view, reservation.tree).items():
            if share.police_mbps is not None:
                expected[switch, reservation.tree_id] = of.meter_rate_kbps(share.police_mbps)
    return expected


def job(controller, job_id, **query):
    path = "/jobs/%d" % job_id + ("?" + "&".join("%s=%s" % kv for kv in query.items())
                                  if query else "")
    status, report = controller.request("GET", path)
    assert status == 200, report
    return report


def test_a_new_job_shrinks_the_other_to_its_share_and_a_release_grows_it_back(one_spine):
    _, first = post(one_spine, "/jobs", dict(COLOCATED, workers=FIRST))
    status, second = post(one_spine, "/jobs", dict(COLOCATED, workers=SECOND))
    assert status == 201, second
    moved = job(one_spine, first["id"])
    assert moved["generation"] == first["generation"] + 1
    assert moved["rate_mbps"] == pytest.approx(second["rate_mbps"], rel=0.02)
    assert moved["rate_mbps"] < 0.6 * first["rate_mbps"]
    assert moved["fair_share_mbps"] == pytest.approx(moved["rate_mbps"], rel=0.02)
    assert meter_rates(one_spine) == booked_meters(one_spine)   # the switches hold the new rates
    assert second["generation"] == 1 and second["effective_round"] == 0
    one_spine.request("DELETE", "/jobs/%d" % second["id"], headers=release_key(second))
    grown = job(one_spine, first["id"])
    assert grown["generation"] == moved["generation"] + 1
    assert grown["rate_mbps"] == pytest.approx(first["rate_mbps"], rel=0.02)
    assert meter_rates(one_spine) == booked_meters(one_spine)
    one_spine.request("DELETE", "/jobs/%d" % first["id"], headers=release_key(first))
    assert empty(one_spine)


def test_an_admission_finds_each_live_jobs_demand_once(one_spine, monkeypatch):
    """The live jobs' demands are found once and give both their shares and what they
    hold, not found again for what they hold."""
    from syncfabric.services import tenants
    _, first = post(one_spine, "/jobs", dict(COLOCATED, workers=FIRST))
    found = []

    def counted(job, *args):
        found.append(job.id)
        return job_demand(job, *args)
    job_demand = tenants.job_demand
    monkeypatch.setattr(tenants, "job_demand", counted)
    status, second = post(one_spine, "/jobs", dict(COLOCATED, workers=SECOND))
    assert status == 201, second
    assert found == [first["id"]]
    assert job(one_spine, first["id"])["rate_mbps"] < 0.6 * first["rate_mbps"]   # it moved


def test_the_shrink_tightens_meters_only_once_the_workers_reached_its_round(one_spine):
    _, first = post(one_spine, "/jobs", dict(COLOCATED, workers=FIRST))
    for worker in FIRST:
        job(one_spine, first["id"], worker=worker, round=5)
    before = meter_rates(one_spine)
    admission = hub.spawn(post, one_spine, "/jobs", dict(COLOCATED, workers=SECOND))
    hub.sleep(0.5)
    told = job(one_spine, first["id"], worker="h1", round=6)
    assert told["generation"] == 2 and told["effective_round"] == 5 + EFFECTIVE_MARGIN
    assert meter_rates(one_spine) == before   # its workers still send at the old rates
    assert not admission.dead
    for worker in FIRST:
        job(one_spine, first["id"], worker=worker, round=5 + EFFECTIVE_MARGIN)
    status, second = admission.wait()
    assert status == 201, second
    assert meter_rates(one_spine) == booked_meters(one_spine) != before


def test_the_shrink_waits_no_longer_for_workers_that_compute_with_every_round_back(one_spine):
    """Workers computing between rounds (every round they began back) need not begin
    the round the new rates hold from: once each says so in a read of the new
    generation, whose answer holds those rates, the admission goes on. Said in a read
    of the old generation, it does not count."""
    _, first = post(one_spine, "/jobs", dict(COLOCATED, workers=FIRST))
    for worker in FIRST:
        job(one_spine, first["id"], worker=worker, round=5, back=5)   # generation 1
    before = meter_rates(one_spine)
    admission = hub.spawn(post, one_spine, "/jobs", dict(COLOCATED, workers=SECOND))
    hub.sleep(0.5)
    assert not admission.dead and meter_rates(one_spine) == before
    told = job(one_spine, first["id"], worker="h1", round=5, back=5)
    assert told["generation"] == 2 and told["effective_round"] == 5 + EFFECTIVE_MARGIN
    hub.sleep(0.3)
    assert not admission.dead   # h3 has not read generation 2
    job(one_spine, first["id"], worker="h3", round=5, back=4)   # round 5 still out
    hub.sleep(0.3)
    assert not admission.dead
    job(one_spine, first["id"], worker="h3", round=5, back=5)
    with hub.Timeout(2.0):
        status, second = admission.wait()
    assert status == 201, second
    assert meter_rates(one_spine) == booked_meters(one_spine) != before


def test_the_shrink_waits_for_a_round_its_worker_sent_at_the_old_rates(one_spine):
    """A worker that began the round the new rates hold from before it read them sent it
    at the old rates, and says so (`paced`): the old meters stay until that round is
    back. Tightened at once, they would cut what it sends."""
    _, first = post(one_spine, "/jobs", dict(COLOCATED, workers=FIRST))
    for worker in FIRST:
        job(one_spine, first["id"], worker=worker, round=5, back=5)   # generation 1
    before = meter_rates(one_spine)
    admission = hub.spawn(post, one_spine, "/jobs", dict(COLOCATED, workers=SECOND))
    hub.sleep(0.5)
    effective = job(one_spine, first["id"], worker="h1", round=5, back=5)["effective_round"]
    job(one_spine, first["id"], worker="h3", round=effective, back=5, paced=1)
    hub.sleep(0.3)
    assert not admission.dead and meter_rates(one_spine) == before
    job(one_spine, first["id"], worker="h3", round=effective, back=effective)   # it is back
    with hub.Timeout(2.0):
        status, second = admission.wait()
    assert status == 201, second
    assert meter_rates(one_spine) == booked_meters(one_spine) != before


@pytest.mark.parametrize("ending", ["workers say done", "released"])
def test_the_shrink_waits_no_longer_for_a_job_whose_workers_ended(one_spine, ending):
    """A job in its last rounds never reaches the round its new rates hold from: the
    admission that shrank it goes on once its workers say they end, or once it is
    released, not after they went quiet (QUIET_S)."""
    _, first = post(one_spine, "/jobs", dict(COLOCATED, workers=FIRST))
    for worker in FIRST:
        job(one_spine, first["id"], worker=worker, round=5)
    admission = hub.spawn(post, one_spine, "/jobs", dict(COLOCATED, workers=SECOND))
    hub.sleep(0.5)
    assert not admission.dead
    job(one_spine, first["id"], worker="h1", round=5, done=1)
    hub.sleep(0.3)
    assert not admission.dead   # h3 still runs at the old rates
    if ending == "released":
        one_spine.request("DELETE", "/jobs/%d" % first["id"], headers=release_key(first))
    else:
        job(one_spine, first["id"], worker="h3", round=5, done=1)
    with hub.Timeout(2.0):
        status, second = admission.wait()
    assert status == 201, second


def test_a_job_whose_minimum_cannot_be_met_gets_409_and_changes_nothing(one_spine):
    _, first = post(one_spine, "/jobs", dict(COLOCATED, workers=FIRST))
    before = (meter_rates(one_spine), dict(one_spine.services.fabric.book.reserved_mbps))
    status, refused = post(one_spine, "/jobs", dict(COLOCATED, workers=SECOND, min_rate_mbps=15))
    assert status == 409 and "below its min_rate_mbps" in refused["error"], refused
    assert job(one_spine, first["id"])["generation"] == first["generation"]
    assert (meter_rates(one_spine), dict(one_spine.services.fabric.book.reserved_mbps)) == before
    status, refused = post(one_spine, "/jobs", dict(COLOCATED, workers=SECOND))
    assert status == 201   # at its own default minimum it fits
    _, listing = one_spine.request("GET", "/jobs")
    assert len(listing["jobs"]) == 2


def test_weights_divide_what_the_jobs_share(one_spine):
    assert one_spine.request("PUT", "/fabric/policy", {"policy": "weighted"})[1]["policy"] == \
        "weighted"
    _, first = post(one_spine, "/jobs", dict(COLOCATED, workers=FIRST, weight=3))
    _, second = post(one_spine, "/jobs", dict(COLOCATED, workers=SECOND))
    heavy = job(one_spine, first["id"])
    assert heavy["rate_mbps"] == pytest.approx(3 * second["rate_mbps"], rel=0.03)


def test_a_policy_that_is_not_one_gets_400_and_changes_nothing(one_spine):
    status, answer = one_spine.request("PUT", "/fabric/policy", {"policy": "greedy"})
    assert status == 400 and "first-come, fair, weighted" in answer["error"]
    assert one_spine.request("GET", "/fabric/policy")[1]["policy"] == "fair"


def test_switching_to_fair_moves_the_live_jobs_to_their_shares(one_spine):
    one_spine.request("PUT", "/fabric/policy", {"policy": "first-come"})
    _, first = post(one_spine, "/jobs", dict(COLOCATED, workers=FIRST))
    assert post(one_spine, "/jobs", dict(COLOCATED, workers=SECOND))[0] == 409
    one_spine.request("PUT", "/fabric/policy", {"policy": "fair"})
    assert job(one_spine, first["id"])["rate_mbps"] == pytest.approx(first["rate_mbps"])
    assert post(one_spine, "/jobs", dict(COLOCATED, workers=SECOND))[0] == 201


def test_a_job_alone_whose_plan_beats_every_plain_one_is_planned_once(monkeypatch):
    """Under fair, a job alone on the fabric whose plan with aggregators is shorter than
    any without them could be (1.30 against 1.50 S/B here) is not planned again
    without them: job set-up pays for one plan."""
    calls = []
    plan_job = round_planner.plan_job
    monkeypatch.setattr(round_planner, "plan_job", lambda *args: calls.append(args) or
                        plan_job(*args))
    for controller in connected(description(spines=2, leaves=4, hosts_per_leaf=4,
                                            aggregator_bw=9)):
        workers = ["h%d" % (1 + 4 * leaf) for leaf in range(4)]
        status, answer = post(controller, "/jobs", dict(COLOCATED, workers=workers,
                                                        aggregation=True))
        assert status == 201, answer
        assert answer["aggregators"] and len(calls) == 1


def test_a_new_job_is_planned_around_the_others_where_that_makes_every_share_larger():
    """4 leaves of 4 hosts under 2 spines, 20 Mbit/s: each job's workers are one host of
    every leaf, its sums' host links bound it alone (13.33 Mbit/s). The first job's
    routes load one spine's link into a leaf twice the other's; planned on what it
    leaves at its minimum, the second laid its flows the same way and both got 11.43.
    Planned around it, the second takes the other spine's links: both run as fast as
    alone."""
    for controller in connected(description(spines=2, leaves=4, hosts_per_leaf=4)):
        jobs = [post(controller, "/jobs", dict(COLOCATED, workers=["h%d" % (first + 4 * leaf)
                                                                   for leaf in range(4)]))[1]
                for first in (1, 2)]
        alone = jobs[0]["rate_mbps"]
        assert alone == pytest.approx(40 / 3, rel=0.01)
        for answer in jobs:
            assert job(controller, answer["id"])["rate_mbps"] == pytest.approx(alone, rel=0.01)


def test_a_release_during_an_admission_grows_the_others_once_the_new_job_is_booked(one_spine):
    """A job released while another is being booked: the jobs it would grow wait until
    the new job's trees and plan are booked, or they would take the links its share was
    planned on."""
    jobs = one_spine.services.jobs
    _, first = post(one_spine, "/jobs", dict(COLOCATED, workers=FIRST))
    create_trees, seen = jobs.trees.create_trees, []

    def booking(*args):
        seen.append(jobs.tenants.busy)
        jobs.tenants.rebalance(time.monotonic())   # a release lands meanwhile
        seen.append(jobs.tenants.pending)
        return create_trees(*args)
    jobs.trees.create_trees = booking
    try:
        status, _second = post(one_spine, "/jobs", dict(COLOCATED, workers=SECOND))
    finally:
        jobs.trees.create_trees = create_trees
    assert status == 201 and seen == [True, "grow"]
    assert not jobs.tenants.busy and not jobs.tenants.pending   # grown after, then done


def test_a_new_jobs_plans_are_compared_by_the_rounds_they_make_not_their_mbit():
    """Of two plans of a new job beside job 7, the one with more Mbit/s but twice the
    bytes a round makes its rounds longer: the other is kept."""
    from types import SimpleNamespace

    from syncfabric.services.tenants import NEW_JOB, slowdowns

    def plan(predicted_s, rate, bound_s=1.0):
        return SimpleNamespace(predicted_s=predicted_s, gradients=SimpleNamespace(f=rate),
                               bound_s=bound_s)
    jobs = {7: SimpleNamespace(round=plan(1.0, 10.0))}        # 10 Mbit a round
    lean = ("request", plan(1.0, 10.0), {NEW_JOB: 8.0, 7: 8.0})
    heavy = ("request", plan(2.0, 10.0), {NEW_JOB: 12.0, 7: 8.0})   # 20 Mbit a round
    candidates = [lean, heavy]
    assert slowdowns(jobs, lean, candidates) == [1.25, 1.25]
    assert slowdowns(jobs, heavy, candidates) == [pytest.approx(20 / 12), 1.25]
    assert min(candidates, key=lambda c: slowdowns(jobs, c, candidates)) is lean


def test_a_job_whose_aggregators_others_load_is_planned_without_them():
    """4 leaves of 4 hosts under 2 spines with an aggregator each: the first job sums in
    the aggregators; the second, whose gradients would share their links, goes without
    (its report lists none), at a share no smaller than the first's now."""
    for controller in connected(description(spines=2, leaves=4, hosts_per_leaf=4,
                                            aggregator_bw=9)):
        jobs = []
        for first in (1, 2):
            workers = ["h%d" % (first + 4 * leaf) for leaf in range(4)]
            status, answer = post(controller, "/jobs", dict(COLOCATED, workers=workers,
                                                            aggregation=True))
            assert status == 201, answer
            jobs.append(answer)
        assert jobs[0]["aggregators"] and not jobs[1]["aggregators"]
        assert jobs[1]["rate_mbps"] >= job(controller, jobs[0]["id"])["rate_mbps"] * 0.98


def test_a_job_that_asks_not_to_borrow_sends_its_floor_where_the_others_borrow(one_spine):
    one_spine.request("PUT", "/fabric/policy", {"policy": "fair", "borrow": True})
    status, answer = one_spine.request("POST", "/jobs", dict(COLOCATED, workers=FIRST,
                                                             borrow="no"))
    assert status == 400 and "borrow must be true or false" in answer["error"]
    assert empty(one_spine)   # nothing of it was installed
    _, floor_only = post(one_spine, "/jobs", dict(COLOCATED, workers=FIRST, borrow=False))
    _, borrowing = post(one_spine, "/jobs", dict(COLOCATED, workers=SECOND))
    assert job(one_spine, floor_only["id"])["borrow"] is None
    assert job(one_spine, borrowing["id"])["borrow"]["dscp"] == BORROWED_DSCP


def test_a_job_may_borrow_into_its_aggregators_only_what_their_bookings_leave():
    """Alone on the fabric, a job that sums in aggregators of 9 Mbit/s is told, for each
    one its gradients go through, what the bookings there leave; it borrows into no
    other."""
    for controller in connected(description(spines=2, leaves=4, hosts_per_leaf=4,
                                            aggregator_bw=9)):
        controller.request("PUT", "/fabric/policy", {"policy": "fair", "borrow": True})
        workers = ["h%d" % (1 + 4 * leaf) for leaf in range(4)]
        _, answer = post(controller, "/jobs", dict(COLOCATED, workers=workers,
                                                   aggregation=True))
        booked = controller.services.trees.book.reserved_mbps
        used = {aggregator["host"] for aggregator in answer["aggregators"]}
        borrowable = job(controller, answer["id"])["borrow"]["aggregators_mbps"]
        assert used and set(borrowable) == used
        for host in used:
            assert 0 < booked[host] <= 9
            assert borrowable[host] == pytest.approx(9 - booked[host])


def test_borrowing_is_told_in_every_report_and_a_bad_flag_changes_nothing(one_spine):
    _, first = post(one_spine, "/jobs", dict(COLOCATED, workers=FIRST))
    assert first["borrow"] is None   # shares are caps by default
    assert first["borrowed_mbps"] is None and first["borrowed_by"] == {}   # none said it
    status, shown = one_spine.request("PUT", "/fabric/policy", {"policy": "fair", "borrow": True})
    assert status == 200 and shown["borrow"] is True
    # the borrowed class's DSCP, and what a host sends in all at most: its link
    assert job(one_spine, first["id"])["borrow"] == {"dscp": BORROWED_DSCP, "ceiling_mbps": 20.0,
                                                     "aggregators_mbps": {}}
    status, answer = one_spine.request("PUT", "/fabric/policy", {"policy": "fair", "borrow": 1})
    assert status == 400 and "borrow must be true or false" in answer["error"]
    assert one_spine.request("GET", "/fabric/policy")[1]["borrow"] is True
    one_spine.request("PUT", "/fabric/policy", {"policy": "fair"})
    assert job(one_spine, first["id"])["borrow"] is None


def test_jobs_that_share_a_link_are_given_windows_from_what_their_workers_say(one_spine):
    """Interleaving: two jobs on the one spine whose workers say they compute as long
    as they communicate get one period and windows that do not overlap (none while
    they run back to back); a window moves the job's ETag and the list's, which the
    daemons poll; what a worker says that is not seconds is not believed."""
    jobs = one_spine.services.jobs
    answers = [post(one_spine, "/jobs", dict(COLOCATED, workers=workers))[1]
               for workers in (FIRST, SECOND)]
    ids, alone = [answer["id"] for answer in answers], answers[0]["rate_mbps"]
    status, shown = one_spine.request("PUT", "/fabric/policy",
                                      {"policy": "fair", "interleave": True})
    assert status == 200 and shown["interleave"] is True
    assert shown["borrow"] is True   # interleaving borrows unless told not to
    before = one_spine.response("GET", "/jobs/%d?worker=h1&round=1" % ids[0]).headers["ETag"]
    listed = one_spine.response("GET", "/jobs").headers["ETag"]
    for job_id, workers in zip(ids, (FIRST, SECOND)):
        for worker in workers:
            job(one_spine, job_id, worker=worker, round=3, comm_s="nan", compute_s=-1)
    jobs.follow(time.monotonic())
    assert jobs.jobs[ids[0]].rounds.comm_s == {}   # nothing believable said
    # their workers run, back to back as far as the controller knows: their rounds (as
    # it predicts them alone) do not fit in their iterations, and they run freely
    first, second = (job(one_spine, job_id) for job_id in ids)
    assert first["period_s"] is second["period_s"] is None
    for job_id, workers in zip(ids, (FIRST, SECOND)):
        for worker, borrowed in zip(workers, (2.5, 1.5)):
            job(one_spine, job_id, worker=worker, round=4, comm_s=1.0, compute_s=1.0,
                borrowed_mbps=borrowed)
    jobs.follow(time.monotonic())
    first, second = (job(one_spine, job_id) for job_id in ids)
    assert first["borrowed_mbps"] == 4.0   # what its workers say they borrow, together
    assert first["borrowed_by"] == dict(zip(FIRST, (2.5, 1.5)))   # and each
    assert first["period_s"] == second["period_s"] == pytest.approx(2.0 * (1 + PERIOD_MARGIN))
    assert abs(first["phase_offset_s"] - second["phase_offset_s"]) >= 1.0 - 1e-6
    # each borrows for its round and the period's margin from its window's start, at
    # once up to its rate alone (each job's alone is the one spine's whole link)
    assert first["window_s"] == second["window_s"] == pytest.approx(1.0 * (1 + PERIOD_MARGIN))
    assert first["window_mbps"] == second["window_mbps"] == pytest.approx(alone, rel=0.01)
    assert first["window_mbps"] > first["rate_mbps"]
    after = one_spine.response("GET", "/jobs/%d?worker=h1&round=5" % ids[0]).headers["ETag"]
    assert after != before
    assert one_spine.response("GET", "/jobs").headers["ETag"] != listed
    one_spine.request("PUT", "/fabric/policy", {"policy": "fair", "borrow": True})
    assert job(one_spine, ids[0])["period_s"] is None   # off: no windows
    assert job(one_spine, ids[0])["window_s"] is None


def test_in_its_window_a_job_counts_only_the_bookings_of_jobs_beside_it():
    """What a job may borrow into an aggregator is its part of what the bookings there
    leave, less those of jobs whose windows are apart from its own (idle meanwhile)."""
    from syncfabric.services.job_shares import reserved_beside
    reserved = {"agg-spine1": 8.0, ("spine1", "leaf1"): 3.0}
    assert reserved_beside(reserved, []) == reserved
    assert reserved_beside(reserved, [{"agg-spine1": 5.0}, {"agg-spine1": 1.0}]) == {
        "agg-spine1": 2.0, ("spine1", "leaf1"): 3.0}
    assert reserved == {"agg-spine1": 8.0, ("spine1", "leaf1"): 3.0}   # not changed


def test_interleaving_needs_borrowing_and_a_bad_flag_changes_nothing(one_spine):
    for body, error in (({"policy": "fair", "borrow": False, "interleave": True},
                         "interleave needs borrow"),
                        ({"policy": "first-come", "interleave": True},
                         "interleave needs borrow"),
                        ({"policy": "fair", "borrow": True, "interleave": "yes"},
                         "interleave must be true or false")):
        status, answer = one_spine.request("PUT", "/fabric/policy", body)
        assert status == 400 and error in answer["error"]
    assert one_spine.request("GET", "/fabric/policy")[1]["interleave"] is False
