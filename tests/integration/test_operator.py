"""What an operator's tools read, on a real ryu-manager over a 2x2 Mininet fabric: the
Prometheus scrape, the live page in headless Chromium, and schemathesis fuzzing every
operation against the OpenAPI description."""

import time
from pathlib import Path

import pytest

from experiments import api_fuzz, ui_pictures
from syncfabric.hosts.transport.controller_client import ControllerHttpError
from syncfabric.operator import openapi
from tests.harness.testbeds import running_testbed, scrape

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16665, 18092
ARTIFACTS = Path(__file__).resolve().parents[2] / "results" / "test-artifacts"
CI_EXAMPLES = 200


@pytest.fixture(scope="module")
def bed():
    yield from running_testbed(api_fuzz.fuzz_topo(), OF_PORT, REST_PORT)


@pytest.fixture
def tree_and_plan(bed):
    tree = bed.client.request("POST", "/multicast/trees",
                              {"source": "h1", "receivers": ["h2", "h3", "h4"], "bandwidth_mbps": 4})
    plan = bed.client.request("POST", "/ina/plans", {"job": "page", "workers": ["h1", "h2", "h3"],
                                                     "ps": "h4", "gradient_mb": 1})
    yield tree, plan
    bed.client.request("DELETE", "/multicast/trees/%d" % tree["id"])
    bed.client.request("DELETE", "/ina/plans/%d" % plan["id"])
    assert bed.leftovers() == {}


EXPORTED = {"syncfabric_link_capacity_bytes_per_second", "syncfabric_link_reserved_bytes_per_second",
            "syncfabric_link_rate_bytes_per_second", "syncfabric_link_utilization_ratio",
            "syncfabric_trees", "syncfabric_ina_plans", "syncfabric_selmcast_rounds",
            "syncfabric_jobs", "syncfabric_switches", "syncfabric_admissions", "syncfabric_refusals",
            "syncfabric_releases", "syncfabric_install_confirm_seconds", "syncfabric_reroutes",
            "syncfabric_reroute_seconds", "syncfabric_reconciliations",
            "syncfabric_planning_seconds", "syncfabric_rest_requests",
            "syncfabric_unknown_switch_connections", "syncfabric_admission_drops",
            "syncfabric_job_rate_bytes_per_second", "syncfabric_job_fair_share_bytes_per_second",
            "syncfabric_job_replans", "syncfabric_job_replan_seconds", "syncfabric_class_bytes",
            "syncfabric_floor_policed_bytes"}


def test_a_scrape_shows_reservations_refusals_and_switches(bed, tree_and_plan):
    tree, _plan = tree_and_plan
    with pytest.raises(ControllerHttpError) as refused:
        bed.client.request("POST", "/multicast/trees",
                           {"source": "h1", "receivers": ["h4"], "bandwidth_mbps": 19})
    assert refused.value.status == 409
    links = {(link["src"], link["dst"]): link["reserved_mbps"]
             for link in bed.client.get("/fabric/links")["links"]}
    families = set()
    metrics = scrape(bed, families)
    assert families == EXPORTED
    for src, dst in tree["edges"]:
        reserved = metrics["syncfabric_link_reserved_bytes_per_second", (("dst", dst), ("src", src))]
        assert reserved == pytest.approx(links[src, dst] * 1e6 / 8) and reserved >= 4e6 / 8
    assert metrics["syncfabric_refusals_total", (("resource", "trees"),)] == 1
    assert metrics["syncfabric_rest_requests_total", (("method", "POST"), ("route", "/multicast/trees"),
                                                      ("status", "409"))] == 1
    assert metrics["syncfabric_admissions_total", (("resource", "plans"),)] == 1
    assert metrics["syncfabric_planning_seconds_count", (("kind", "ina"),)] == 1
    assert all(metrics["syncfabric_reconciliations_total", (("switch", switch),)] == 1
               for switch in ("spine1", "spine2", "leaf1", "leaf2"))
    assert metrics["syncfabric_switches", (("state", "synced"),)] == 4
    assert (metrics["syncfabric_trees", ()], metrics["syncfabric_ina_plans", ()]) == (1, 1)
    assert metrics["syncfabric_install_confirm_seconds_count", (("outcome", "confirmed"),)] >= 2
    # port counters are polled every second: every link has a rate once two polls are in
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        rates = [key for key in scrape(bed) if key[0] == "syncfabric_link_rate_bytes_per_second"]
        if len(rates) == len(links):
            break
        time.sleep(0.5)
    assert len(rates) == len(links)


def test_the_page_shows_the_tree_and_plan_and_highlights_exactly_a_trees_links(bed, tree_and_plan):
    tree, plan = tree_and_plan
    driver = ui_pictures.chromium(width=1200, height=800)
    try:
        driver.get(bed.client.base_url + "/ui")
        assert ui_pictures.select(driver, "tree", tree["id"]) == ui_pictures.link_keys(tree["edges"])
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / "ui_tree.png"))
        assert ui_pictures.select(driver, "plan", plan["id"]) == plan_links(plan)
        driver.save_screenshot(str(ARTIFACTS / "ui_plan.png"))
    finally:
        driver.quit()


def plan_links(plan):
    return ui_pictures.link_keys(
        [(a, b) for legs in plan["workers"].values() for leg in legs
         for a, b in zip(leg["path"], leg["path"][1:])]
        + [(a, b) for aggregate in plan["aggregates"]
           for a, b in zip(aggregate["path"], aggregate["path"][1:])])


def test_the_page_lists_a_job_and_highlights_its_trees_and_plan(bed):
    """And says that its rate is a floor it may borrow beyond, when the policy lends."""
    job = bed.client.request("POST", "/jobs", {"workers": ["h1", "h2", "h3"],
                                               "model_bytes": 100000})
    bed.client.put("/fabric/policy", {"policy": "fair", "borrow": True})
    driver = ui_pictures.chromium(width=1200, height=800)
    try:
        trees = [bed.client.get("/multicast/trees/%d" % i) for i in job["trees"]]
        expected = plan_links(bed.client.get("/ina/plans/%d" % job["plan"])).union(
            *(ui_pictures.link_keys(tree["edges"]) for tree in trees))
        driver.get(bed.client.base_url + "/ui")
        assert ui_pictures.select(driver, "job", job["id"]) == expected
        assert "a floor, borrowing up to" in ui_pictures.entry_text(driver, "job", job["id"])
    finally:
        driver.quit()
        bed.client.put("/fabric/policy", {"policy": "fair"})
        bed.client.request("DELETE", "/jobs/%d" % job["id"])
    assert bed.leftovers() == {}


def test_schemathesis_finds_no_server_error_schema_violation_or_leak(bed):
    rows = api_fuzz.fuzz(bed.client.base_url, bed.token, bed.client.get("/fabric/topology"),
                         CI_EXAMPLES)
    print("\n".join("%s: %d examples, %s" % (r["operation"], r["examples"], r["statuses"])
                    for r in rows))
    described = {"%s %s" % (method, path)
                 for path, method in openapi.operations(openapi.description())}
    # schemathesis does not fuzz the operation that serves the description itself
    assert {r["operation"] for r in rows} == described - {"GET /openapi.json"}
    assert [r for r in rows if api_fuzz.failures(r)] == []
    varied = [r for r in rows if "{" in r["operation"] or r["operation"].split()[0] in ("POST", "PUT")]
    assert all(r["examples"] == CI_EXAMPLES for r in varied), rows
    assert all(r["created"] > 0 for r in rows if r["operation"].startswith("POST")), rows
    assert bed.leftovers() == {}
