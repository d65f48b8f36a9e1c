"""How jobs share the fabric (services/job_shares.py, job_refusals.py): every job's report
says its rate, weight, minimum and the share weighted max-min fairness would give it
among the jobs installed now; a refused job names what on its way is full, and who
holds it."""

from types import SimpleNamespace

import pytest

from syncfabric.decisions.fabric_view import FabricView
from syncfabric.services.job_shares import sharing
from tests.harness.fake_controller import connected, description
from tests.harness.in_process import NOTHING_LISTED, empty, listed, post, release_key

COLOCATED = {"model_bytes": 4_000_000, "placement": "colocated", "aggregation": False}


@pytest.fixture
def one_spine():
    """2 leaves under one spine, 2 hosts each: jobs across the leaves share its links."""
    yield from connected(description(spines=1))


def test_a_job_alone_reports_its_rate_as_its_fair_share(one_spine):
    _, job = post(one_spine, "/jobs", dict(COLOCATED, workers=["h1", "h3"]))
    assert job["weight"] == 1 and job["min_rate_mbps"] == pytest.approx(2.0)   # 10% of 20
    assert job["fair_share_mbps"] == pytest.approx(job["rate_mbps"]) and job["rate_mbps"] > 0
    assert "->" in job["bound_by"] or job["bound_by"] == "ceiling"
    _, listing = one_spine.request("GET", "/jobs")
    assert listing["jobs"][0]["fair_share_mbps"] == pytest.approx(job["rate_mbps"])


def test_a_job_refused_names_the_link_another_job_holds_and_changes_nothing(one_spine):
    assert one_spine.request("PUT", "/fabric/policy", {"policy": "first-come"})[0] == 200
    _, first = post(one_spine, "/jobs", dict(COLOCATED, workers=["h1", "h3"]))
    code, answer = post(one_spine, "/jobs", dict(COLOCATED, workers=["h2", "h4"]))
    assert code == 409, answer
    assert answer["bottleneck"] in ("leaf1->spine1", "spine1->leaf2", "leaf2->spine1",
                                    "spine1->leaf1"), answer
    assert answer["held_by"] == [first["id"]] and answer["max_rate_mbps"] == pytest.approx(0.0)
    assert "held by job %d" % first["id"] in answer["error"]
    assert [j["id"] for j in one_spine.request("GET", "/jobs")[1]["jobs"]] == [first["id"]]
    one_spine.request("DELETE", "/jobs/%d" % first["id"], headers=release_key(first))
    assert listed(one_spine) == NOTHING_LISTED and empty(one_spine)


@pytest.mark.parametrize("fields, message", [
    ({"weight": 0}, "weight must be a positive number"),
    ({"weight": "heavy"}, "weight must be a positive number"),
    ({"min_rate_mbps": -1}, "min_rate_mbps must be a positive number"),
])
def test_a_bad_weight_or_minimum_gets_400(one_spine, fields, message):
    code, answer = post(one_spine, "/jobs", dict(COLOCATED, workers=["h1", "h3"], **fields))
    assert code == 400 and message in answer["error"], answer
    assert empty(one_spine)


def installed(job_id, rate, loads, weight=1.0, tree_ids=()):
    """A job as the sharing sees it: its request, its plan's rate and loads, its trees."""
    job = SimpleNamespace(id=job_id, plan_id=job_id, tree_ids=list(tree_ids),
                          request={"workers": ["h1", "h3"], "weight": weight})
    plan = SimpleNamespace(result=SimpleNamespace(f=rate, loads=lambda: dict(loads)))
    return job, plan


def test_two_jobs_on_one_link_are_each_given_half_of_it_whatever_they_hold_now():
    view = FabricView(description(spines=1))
    link = ("leaf1", "spine1")
    first, first_plan = installed(1, 15.0, {link: 15.0, ("h1", "leaf1"): 15.0})
    second, second_plan = installed(2, 5.0, {link: 5.0, ("h2", "leaf1"): 5.0})
    plans = SimpleNamespace(plans={1: first_plan, 2: second_plan})
    trees = SimpleNamespace(book=SimpleNamespace(view=view))
    shares = sharing([first, second], trees, plans, view)
    assert {i: (s["rate_mbps"], s["fair_share_mbps"], s["bound_by"]) for i, s in shares.items()} \
        == {1: (15.0, pytest.approx(10.0), "leaf1->spine1"),
            2: (5.0, pytest.approx(10.0), "leaf1->spine1")}
    first.request["weight"] = 3.0   # a weight of 3 takes three quarters
    assert sharing([first, second], trees, plans, view)[1]["fair_share_mbps"] == pytest.approx(15.0)


def test_the_metrics_say_each_jobs_rate_and_fair_share(one_spine):
    _, job = post(one_spine, "/jobs", dict(COLOCATED, workers=["h1", "h3"]))
    registry = one_spine.services.metrics.registry
    labels = {"job": str(job["id"])}
    assert registry.get_sample_value("syncfabric_job_rate_bytes_per_second", labels) \
        == pytest.approx(job["rate_mbps"] * 1e6 / 8)
    assert registry.get_sample_value("syncfabric_job_fair_share_bytes_per_second", labels) \
        == pytest.approx(job["fair_share_mbps"] * 1e6 / 8)
