"""What an operator's tools read, in-process on fake switches: the OpenAPI description
(valid, served, in step with the routes Ryu registered, and matched by the answers),
the Prometheus metrics, and the live page's files."""

import pytest
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate
from prometheus_client.parser import text_string_to_metric_families

from apps.fabric_controller import FabricController
from apps.operator_api import registered_operations
from syncfabric.operator import openapi
from syncfabric.operator.live_page import UI_ASSETS
from tests.harness.fake_controller import InProcessController, description

TREE = {"source": "h1", "receivers": ["h2", "h3", "h4"], "bandwidth_mbps": 5}
PLAN = {"job": "j", "workers": ["h1", "h2", "h3"], "ps": "h4", "gradient_mb": 1}
ROUND = {"job": "r", "workers": ["h1", "h2", "h3", "h4"], "update_mb": 1, "p": 1}


@pytest.fixture
def controller():
    controller = InProcessController(description())
    yield controller
    controller.close()


def test_the_description_is_valid_openapi():
    validate(openapi.description())


def test_the_description_and_the_routes_registered_with_ryu_are_the_same(controller):
    registered = registered_operations(controller.wsgi.mapper)
    assert registered == openapi.operations(openapi.description())
    status, served = controller.request("GET", "/openapi.json")
    assert status == 200 and served == openapi.description()


def test_a_controller_describes_only_the_apps_it_loaded():
    controller = InProcessController(description(), apps=(FabricController,))
    try:
        status, served = controller.request("GET", "/openapi.json")
    finally:
        controller.close()
    assert status == 200
    validate(served)
    assert {path.split("/")[1] for path in served["paths"]} == {"fabric", "openapi.json",
                                                                "metrics", "ui"}


def conforms(body, schema_name):
    """Raise unless body matches the description's schema of that name."""
    spec = openapi.description()
    OAS30Validator(dict(openapi.ref(schema_name), components=spec["components"])).validate(body)
    return True


def test_answers_match_their_schemas(controller):
    status, tree = controller.request("POST", "/multicast/trees", TREE)
    assert status == 201 and conforms(tree, "Tree")
    status, selmcast_round = controller.request("POST", "/selmcast/rounds", ROUND)
    assert status == 201 and conforms(selmcast_round, "Round")
    assert controller.request("GET", "/selmcast/rounds")[1]["rounds"]
    status, released = controller.request("DELETE", "/selmcast/rounds/%d" % selmcast_round["id"],
                                          headers={"X-Release-Key": selmcast_round["release_key"]})
    assert status == 200 and conforms(released["released"], "Round")
    status, plan = controller.request("POST", "/ina/plans", PLAN)
    assert status == 201 and conforms(plan, "Plan")
    for path, schema in (("/multicast/trees", "TreeList"), ("/ina/plans", "PlanList"),
                         ("/fabric/topology", "Topology"),
                         ("/fabric/links", "Links")):
        status, body = controller.request("GET", path)
        assert status == 200 and conforms(body, schema), path
    status, refused = controller.request("POST", "/multicast/trees", dict(TREE, bandwidth_mbps=500))
    assert status == 409 and conforms(refused, "Error") and "max_feasible_mbps" in refused
    with pytest.raises(Exception):
        conforms(dict(tree, id="one"), "Tree")


def test_a_jobs_answers_match_their_schemas_shares_and_refusal_included(controller):
    status, policy = controller.request("PUT", "/fabric/policy", {"policy": "first-come"})
    assert status == 200 and conforms(policy, "Policy")
    status, job = controller.request("POST", "/jobs", {"workers": ["h1", "h3"],
                                                       "model_bytes": 400_000, "weight": 2})
    assert status == 201 and conforms(job, "Job") and job["weight"] == 2
    assert {"rate_mbps", "fair_share_mbps", "min_rate_mbps", "bound_by"} <= set(job)
    status, listing = controller.request("GET", "/jobs")
    assert status == 200 and conforms(listing, "JobList")
    status, refused = controller.request("POST", "/jobs", {"workers": ["h1", "h3"],
                                                           "model_bytes": 400_000})
    assert status == 409 and conforms(refused, "Error"), refused   # its hosts' links are taken
    assert refused["held_by"] == [job["id"]]


def scrape(controller):
    """{(name, sorted label items): value} of every sample GET /metrics answers."""
    response = controller.response("GET", "/metrics")
    assert response.status_int == 200
    assert response.content_type == "text/plain"
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.text)
            for sample in family.samples}


def link(src, dst):
    return (("dst", dst), ("src", src))


def test_metrics_count_admissions_refusals_releases_and_show_reservations(controller):
    status, tree = controller.request("POST", "/multicast/trees", TREE)
    assert status == 201
    assert controller.request("POST", "/multicast/trees", dict(TREE, bandwidth_mbps=500))[0] == 409
    assert controller.request("POST", "/ina/plans", PLAN)[0] == 201
    metrics = scrape(controller)
    tree_links = {tuple(edge) for edge in tree["edges"]}
    reserved_before = {(src, dst): metrics["syncfabric_link_reserved_bytes_per_second",
                                           link(src, dst)] for src, dst in tree_links}
    assert min(reserved_before.values()) >= 5e6 / 8
    assert metrics["syncfabric_link_reserved_bytes_per_second", link("h1", "leaf1")] > 5e6 / 8
    assert metrics["syncfabric_link_capacity_bytes_per_second", link("h1", "leaf1")] == 20e6 / 8
    assert metrics["syncfabric_admissions_total", (("resource", "trees"),)] == 1
    assert metrics["syncfabric_admissions_total", (("resource", "plans"),)] == 1
    assert metrics["syncfabric_refusals_total", (("resource", "trees"),)] == 1
    assert (metrics["syncfabric_trees", ()], metrics["syncfabric_ina_plans", ()]) == (1, 1)
    assert metrics["syncfabric_switches", (("state", "synced"),)] == 4
    assert metrics["syncfabric_rest_requests_total", (("method", "POST"), ("route", "/multicast/trees"),
                                                      ("status", "409"))] == 1
    assert metrics["syncfabric_reconciliations_total", (("switch", "spine1"),)] == 1
    assert metrics["syncfabric_install_confirm_seconds_count", (("outcome", "confirmed"),)] >= 2
    assert metrics["syncfabric_planning_seconds_count", (("kind", "tree"),)] == 2
    assert metrics["syncfabric_planning_seconds_count", (("kind", "ina"),)] == 1

    status, _ = controller.request("DELETE", "/multicast/trees/%d" % tree["id"],
                                   headers={"X-Release-Key": tree["release_key"]})
    assert status == 200
    metrics = scrape(controller)
    assert metrics["syncfabric_releases_total", (("cause", "request"), ("resource", "trees"))] == 1
    assert metrics["syncfabric_trees", ()] == 0
    for src, dst in tree_links:
        assert metrics["syncfabric_link_reserved_bytes_per_second", link(src, dst)] == pytest.approx(
            reserved_before[src, dst] - 5e6 / 8), (src, dst)


def test_a_reroute_and_an_expired_lease_are_counted(controller):
    status, tree = controller.request("POST", "/multicast/trees", dict(TREE, ttl_s=0.3))
    assert status == 201
    spine = next(b for a, b in tree["edges"] if a == "leaf1")
    controller.port_down("leaf1", spine)
    metrics = scrape(controller)
    assert metrics["syncfabric_reroutes_total", (("outcome", "moved"), ("resource", "trees"))] == 1
    assert metrics["syncfabric_reroute_seconds_count", (("resource", "trees"),)] == 1
    deadline = 50
    while controller.request("GET", "/multicast/trees")[1]["trees"] and deadline:
        controller.settle()
        deadline -= 1
    metrics = scrape(controller)
    assert metrics["syncfabric_releases_total", (("cause", "lease"), ("resource", "trees"))] == 1


def test_the_page_and_its_assets_are_served_and_nothing_else(controller):
    page = controller.response("GET", "/ui")
    assert page.status_int == 200 and page.content_type == "text/html"
    for asset in UI_ASSETS:
        assert 'src="/ui/%s"' % asset in page.text or 'href="/ui/%s"' % asset in page.text
        response = controller.response("GET", "/ui/" + asset)
        assert response.status_int == 200 and response.content_type == UI_ASSETS[asset]
    assert controller.response("GET", "/ui/..%2Fopenapi.py").status_int == 404
    status, refused = controller.request("GET", "/ui/openapi.py")
    assert status == 404 and "error" in refused


def test_the_dashboard_and_scrape_config_name_only_metrics_we_export(controller):
    import json
    import re
    from pathlib import Path
    docs = Path(__file__).resolve().parents[2] / "docs"
    dashboard = json.loads((docs / "grafana-dashboard.json").read_text())
    queried = {re.sub(r"_(bucket|count|sum)$", "", name)
               for panel in dashboard["panels"] for target in panel["targets"]
               for name in re.findall(r"syncfabric_\w+", target["expr"])}
    families = text_string_to_metric_families(controller.response("GET", "/metrics").text)
    exported = {family.name + ("_total" if family.type == "counter" else "") for family in families}
    assert queried and queried <= exported, queried - exported
    assert "metrics_path: /metrics" in (docs / "prometheus.yml").read_text()
