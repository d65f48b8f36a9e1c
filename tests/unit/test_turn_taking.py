"""Jobs that take turns (POST /jobs {"turns_with": id}, services/turn_taking.py): a
group's gather job booked inside its all-reduce job's booking, the pair credited the
lesser of their loads, the taker no tenant of its own, moved with its partner, released
with it and taken back after a restart; in-process on fake switches."""

import time

import pytest

from syncfabric.decisions.reservations import ReservationError
from syncfabric.services import rate_moves
from syncfabric.services.job_shares import job_loads
from syncfabric.services.tree_records import restore_credit
from syncfabric.services.turn_taking import book_turns, pair_credit, turns_key
from tests.harness.fake_controller import InProcessController, connected, description, restarted
from tests.harness.in_process import NOTHING_LISTED, empty, listed, post, release_key

WORKERS = ["h1", "h2", "h3"]   # h1, h2 on leaf1; h3 on leaf2 (20 Mbit/s links)
GROUP_JOB = {"workers": WORKERS, "model_bytes": 300_000, "placement": "colocated",
             "aggregation": False}
GATHER_JOB = {"workers": WORKERS, "model_bytes": 300_000, "gather": True}
OTHER_JOB = {"workers": ["h2", "h4"], "model_bytes": 300_000, "placement": "colocated",
             "aggregation": False}   # h4 on leaf2: it shares the leaves' links with the group


def booked(controller):
    """{resource: Mbit/s} the fabric's book holds, nothing below a milli-Mbit/s."""
    return {resource: round(load, 6) for resource, load
            in controller.services.fabric.book.reserved_mbps.items() if abs(load) > 1e-6}


def within_capacity(controller):
    book = controller.services.fabric.book
    for resource, load in book.reserved_mbps.items():
        capacity = (book.view.graph.edges[resource]["capacity_mbps"]
                    if isinstance(resource, tuple) else book.view.aggregators[resource])
        assert -1e-6 <= load <= capacity + 1e-6, (resource, load, capacity)
    return True


def credit_is_the_pairs_lesser_loads(controller, group, gather):
    """The book's credit for the pair is, on each resource, the lesser of what the two
    jobs hold there now."""
    jobs = controller.services.jobs
    held = [job_loads(jobs.jobs[job["id"]], jobs.trees, jobs.plans) for job in (group, gather)]
    credit = controller.services.fabric.book.credits[turns_key(gather["id"])]
    assert credit and credit == pytest.approx(pair_credit(*held))
    return True


def created(controller, body):
    code, job = post(controller, "/jobs", body)
    assert code == 201, job
    return job


def rate(controller, job):
    return controller.request("GET", "/jobs/%d" % job["id"])[1]["rate_mbps"]


def tree_rates(controller, job):
    report = controller.request("GET", "/jobs/%d" % job["id"])[1]
    return [shard["return"]["rate_mbps"] for shard in report["shards"]]


def test_a_gather_job_that_takes_turns_fits_inside_its_partners_booking(controller):
    group = created(controller, GROUP_JOB)
    alone, group_rate = booked(controller), rate(controller, group)
    gather = created(controller, dict(GATHER_JOB, turns_with=group["id"]))
    assert gather["turns_with"] == group["id"] and group["turns_with"] is None
    # the pair holds what the group's job held alone; it kept its rate (as a second
    # tenant it was halved), and the gather trees run as fast as alone on the fabric
    assert booked(controller) == alone and within_capacity(controller)
    assert rate(controller, group) == pytest.approx(group_rate)
    assert tree_rates(controller, gather) == pytest.approx([10.0] * 3)
    assert "fair_share_mbps" in controller.request("GET", "/jobs/%d" % group["id"])[1]
    assert "fair_share_mbps" not in controller.request("GET", "/jobs/%d" % gather["id"])[1]
    # its release gives back its credit with its trees; the group's job stays as it was
    assert controller.request("DELETE", "/jobs/%d" % gather["id"],
                              headers=release_key(gather))[0] == 200
    assert booked(controller) == alone and controller.services.fabric.book.credits == {}
    assert controller.request("DELETE", "/jobs/%d" % group["id"],
                              headers=release_key(group))[0] == 200
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def test_without_turns_the_gather_job_is_a_second_tenant_and_halves_the_group(controller):
    """What turns_with saves, measured the same way: the fair policy's halving."""
    group = created(controller, GROUP_JOB)
    group_rate = rate(controller, group)
    created(controller, GATHER_JOB)
    assert rate(controller, group) < 0.75 * group_rate


def test_releasing_the_partner_releases_the_job_that_takes_turns_with_it(controller):
    group = created(controller, GROUP_JOB)
    gather = created(controller, dict(GATHER_JOB, turns_with=group["id"]))
    assert controller.request("DELETE", "/jobs/%d" % group["id"],
                              headers=release_key(group))[0] == 200
    code, answer = controller.request("GET", "/jobs/%d" % gather["id"])
    assert code == 404 and "took turns with job %d" % group["id"] in str(answer), answer
    assert controller.request("GET", "/jobs")[1]["jobs"] == []
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    assert controller.services.fabric.book.credits == {}


def test_the_taker_moves_with_its_partner_as_other_jobs_come_and_go(controller, monkeypatch):
    group = created(controller, GROUP_JOB)
    gather = created(controller, dict(GATHER_JOB, turns_with=group["id"]))
    group_rate, gather_trees = rate(controller, group), tree_rates(controller, gather)
    credited = []
    monkeypatch.setattr(rate_moves, "book_turns",
                        lambda jobs, taker, *rest: credited.append(taker.id)
                        or book_turns(jobs, taker, *rest))
    other = created(controller, OTHER_JOB)
    assert credited == [gather["id"]]   # both of the pair shrank at once: credited once
    factor = rate(controller, group) / group_rate
    assert factor < 0.9   # the group's job moved down to its share
    assert tree_rates(controller, gather) == pytest.approx([r * factor for r in gather_trees])
    assert within_capacity(controller) and credit_is_the_pairs_lesser_loads(controller, group,
                                                                            gather)
    assert controller.request("DELETE", "/jobs/%d" % other["id"],
                              headers=release_key(other))[0] == 200
    assert rate(controller, group) == pytest.approx(group_rate)
    assert tree_rates(controller, gather) == pytest.approx(gather_trees)
    assert within_capacity(controller) and credit_is_the_pairs_lesser_loads(controller, group,
                                                                            gather)


@pytest.fixture
def four_spines():
    """4 leaves of 2 hosts under 4 spines: a group's job whose 4 shards are on hosts of
    their own (leaves 3 and 4) spreads its return trees one to each spine, so that it
    holds a quarter of each spine-to-leaf link of the workers' leaves."""
    yield from connected(description(spines=4, leaves=4, hosts_per_leaf=2))


def test_a_taker_thin_inside_its_partners_booking_is_planned_beside_it(four_spines):
    controller, workers = four_spines, ["h1", "h2", "h3", "h4"]
    group = created(controller, {"workers": workers, "model_bytes": 300_000,
                                 "placement": "dedicated", "shards": 4, "aggregation": False})
    alone = booked(controller)
    gather = created(controller, dict(GATHER_JOB, workers=workers, turns_with=group["id"]))
    # inside the group's booking its trees would share 5 Mbit/s on a spine-to-leaf link;
    # beside it they run at what the workers' downlinks allow, 3 trees in 20 Mbit/s
    assert tree_rates(controller, gather) == pytest.approx([20 / 3] * 4)
    beyond = {resource for resource, load in booked(controller).items()
              if load > alone.get(resource, 0.0) + 1e-6}
    switches = ("spine", "leaf")   # what it books beyond the group's is between switches
    assert beyond and all(isinstance(resource, tuple) and resource[0].startswith(switches)
                          and resource[1].startswith(switches) for resource in beyond), beyond
    assert within_capacity(controller) and credit_is_the_pairs_lesser_loads(controller, group,
                                                                            gather)
    assert controller.request("DELETE", "/jobs/%d" % group["id"],
                              headers=release_key(group))[0] == 200
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    assert controller.services.fabric.book.credits == {}


@pytest.fixture
def three_spines():
    """2 leaves under 3 spines: room for the pair's parts around a failed uplink."""
    yield from connected(description(spines=3))


def test_the_credit_follows_the_pairs_parts_around_a_fault(three_spines):
    controller = three_spines
    group = created(controller, GROUP_JOB)
    gather = created(controller, dict(GATHER_JOB, turns_with=group["id"]))
    jobs = controller.services.jobs
    spine = next(head for tail, head in controller.services.fabric.book.get(
        gather["trees"][0]).tree.edges if tail == "leaf1")
    controller.port_down("leaf1", spine)
    controller.settle_until(lambda: not any(
        ("leaf1", spine) in controller.services.fabric.book.get(tree_id).tree.edges
        for job in (group, gather) for tree_id in job["trees"]))
    jobs.follow(time.monotonic())
    controller.settle()
    assert credit_is_the_pairs_lesser_loads(controller, group, gather)
    assert within_capacity(controller)


def test_a_pair_comes_back_as_it_was_after_a_controller_restart():
    first = InProcessController(description())
    try:
        group = created(first, GROUP_JOB)
        gather = created(first, dict(GATHER_JOB, turns_with=group["id"]))
        before = [first.request("GET", "/jobs/%d" % job["id"])[1] for job in (group, gather)]
        held, credits = booked(first), dict(first.services.fabric.book.credits)
        saved, tables = first.services.store.saved, first.tables()
    finally:
        first.close()
    again = restarted(saved, tables)
    try:
        after = [again.request("GET", "/jobs/%d" % job["id"])[1] for job in (group, gather)]
        assert [{k: v for k, v in report.items() if k != "expires_in_s"} for report in after] \
            == [{k: v for k, v in report.items() if k != "expires_in_s"} for report in before]
        assert booked(again) == held and again.services.fabric.book.credits == credits
    finally:
        again.close()


@pytest.mark.parametrize("body, status, message", [
    (dict(GATHER_JOB, turns_with="1"), 400, "turns_with must be the id of a job"),
    (dict(GATHER_JOB, turns_with=True), 400, "turns_with must be the id of a job"),
    (dict(GATHER_JOB, turns_with=99), 409, "which is not installed"),
    (dict(GATHER_JOB, workers=["h1", "h2"], turns_with=1), 400, "of the same workers"),
])
def test_turns_asked_wrongly_are_refused_and_change_nothing(controller, body, status, message):
    created(controller, GROUP_JOB)
    held = booked(controller)
    code, answer = post(controller, "/jobs", body)
    assert code == status and message in answer["error"], answer
    assert booked(controller) == held and len(controller.request("GET", "/jobs")[1]["jobs"]) == 1


def test_takers_that_fit_nowhere_inside_their_partners_booking_are_planned_beside_it():
    """Eight workers of 8x8 whose group job's shards are on two hosts of their own: its
    booking holds no link between the workers' leaves, so nothing of a gather job's
    trees or a scatter job's gradients fits inside it. Planned beside it, both are
    admitted (before, the gather job's planning raised, and the scatter job got a 409)."""
    controller = InProcessController(description(8, 8, 2, aggregator_bw=20))
    try:
        workers = ["h%d" % i for i in range(1, 9)]
        group = created(controller, {"workers": workers, "model_bytes": 1_048_576,
                                     "placement": "dedicated", "shards": 2})
        for kind in ("gather", "scatter"):
            taker = created(controller, {"workers": workers, "model_bytes": 1_073_760,
                                         kind: True, "turns_with": group["id"]})
            assert taker["turns_with"] == group["id"] and taker[kind] is True
        assert within_capacity(controller)
    finally:
        controller.close()


def test_a_partner_takes_one_taker_of_a_kind_and_a_taker_is_no_partner(controller):
    group = created(controller, GROUP_JOB)
    gather = created(controller, dict(GATHER_JOB, turns_with=group["id"]))
    held = booked(controller)
    code, answer = post(controller, "/jobs", dict(GATHER_JOB, turns_with=group["id"]))
    assert code == 409 and "already takes turns with job %d" % group["id"] in answer["error"]
    code, answer = post(controller, "/jobs", dict(GATHER_JOB, turns_with=gather["id"]))
    assert code == 400 and "takes turns with job %d itself" % group["id"] in answer["error"]
    assert booked(controller) == held and len(controller.request("GET", "/jobs")[1]["jobs"]) == 2


@pytest.mark.parametrize("record, message", [
    ({"key": "turns-2", "loads": [[["h1", "leaf9"], 5.0]]}, "not in this fabric"),
    ({"key": "turns-2", "loads": [[["h1", "leaf1", "spine1"], 5.0]]}, "not in this fabric"),
    ({"key": "turns-2", "loads": [["h1", "five"]]}, "not a credit record"),
    ({"loads": []}, "not a credit record"),
])
def test_a_saved_credit_that_is_not_one_is_refused_and_changes_nothing(controller, record,
                                                                       message):
    book = controller.services.fabric.book
    with pytest.raises(ReservationError, match=message):
        restore_credit(book, record)
    assert book.credits == {} and dict(book.reserved_mbps) == {}
