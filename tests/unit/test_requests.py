"""The REST contract of the in-process controller (all five apps on fake switches): what
bad, unknown, unauthorized and concurrent requests get, and that they change nothing."""

import time

import pytest
from ryu.lib import hub

from tests.harness.fake_controller import InProcessController, description
from tests.harness.in_process import (NOTHING_LISTED, TREE, concurrently, empty, listed, post,
                                      release_key)


@pytest.mark.parametrize("path, body, status, message", [
    ("/multicast/trees", b"{oops", 400, "malformed JSON"),
    ("/multicast/trees", [], 400, "must be a JSON object"),
    ("/multicast/trees", {"source": "h1"}, 400, "missing field(s): bandwidth_mbps, receivers"),
    ("/multicast/trees", dict(TREE, colour=1), 400, "unknown field(s): colour"),
    ("/multicast/trees", dict(TREE, bandwidth_mbps=-1), 400, "positive number"),
    ("/multicast/trees", dict(TREE, policy="flood"), 400, "policy must be one of"),
    ("/multicast/trees", dict(TREE, ttl_s=0), 400, "ttl_s must be"),
    ("/multicast/trees", b'{"source": "h1", "receivers": ["h3"], "bandwidth_mbps": NaN}', 400,
     "NaN is not JSON"),
    ("/multicast/trees", dict(TREE, receivers=["h3", "h9"]), 404, "unknown host(s): h9"),
    ("/multicast/trees", dict(TREE, bandwidth_mbps=50), 409, "largest feasible bandwidth is 20.000"),
    ("/selmcast/rounds", {"job": "x", "workers": ["h1"], "update_mb": 1, "p": 1}, 400,
     "at least 2 distinct"),
    ("/selmcast/rounds", {"job": "x", "workers": ["h1", "h2"], "update_mb": 1, "p": 4}, 400,
     "p must be between 0 and n - 1"),
    ("/selmcast/rounds", {"job": "x", "workers": ["h1", "h9"], "update_mb": 1, "p": 1}, 404,
     "unknown host(s): h9"),
    ("/ina/plans", {"job": "j", "workers": [], "ps": "h4", "gradient_mb": 1}, 400, "workers must be"),
    ("/ina/plans", {"job": "j", "workers": ["h1"], "ps": "h1", "gradient_mb": 1}, 400, "ps must be"),
    ("/ina/plans", {"job": "j", "workers": ["h1", "agg-spine1"], "ps": "h4", "gradient_mb": 1},
     400, "cannot be workers"),
    ("/ina/plans", {"job": "j", "workers": ["h1"], "ps": "h4", "gradient_mb": 1,
                    "aggregators": ["h2"]}, 400, "not aggregator"),
    ("/ina/plans", {"job": "j", "workers": ["h1", "h2"], "ps": ["h3", "h4"], "gradient_mb": 1,
                    "policy": "grid"}, 400, "plans for one PS"),
    ("/ina/plans", {"job": "j", "workers": ["h1", "h99"], "ps": "h4", "gradient_mb": 1}, 404,
     "unknown host(s): h99"),
])
def test_bad_requests_get_their_status_and_change_nothing(controller, path, body, status, message):
    code, answer = post(controller, path, body)
    assert (code, message in answer["error"]) == (status, True), answer
    if status == 409:
        assert answer["max_feasible_mbps"] == pytest.approx(20.0)
    assert listed(controller) == NOTHING_LISTED
    assert empty(controller)


@pytest.mark.parametrize("path", ["/multicast/trees/999", "/multicast/trees/abc",
                                  "/selmcast/rounds/77", "/ina/plans/77"])
def test_unknown_ids_get_404_on_get_and_delete(controller, path):
    for method in ("GET", "DELETE"):
        code, answer = controller.request(method, path)
        assert code == 404 and "no " in answer["error"]


def test_without_a_fabric_requests_get_503_and_change_nothing():
    controller = InProcessController()
    try:
        for path, body in [("/multicast/trees", TREE),
                           ("/ina/plans", {"job": "j", "workers": ["h1"], "ps": "h4",
                                           "gradient_mb": 1}),
                           ("/selmcast/rounds", {"job": "x", "workers": ["h1", "h2"],
                                                 "update_mb": 1, "p": 1})]:
            code, answer = post(controller, path, body)
            assert code == 503 and "PUT /fabric/topology" in answer["error"], answer
        assert listed(controller) == NOTHING_LISTED
    finally:
        controller.close()


def test_state_changes_need_the_token_and_release_needs_the_owner_key(controller, monkeypatch):
    monkeypatch.setenv("SYNCFABRIC_REST_TOKEN", "sesame")
    for method, path, body in [("POST", "/multicast/trees", TREE), ("PUT", "/fabric/topology", {}),
                               ("DELETE", "/multicast/trees/1", None),
                               ("POST", "/ina/plans", {}), ("POST", "/selmcast/rounds", {})]:
        code, answer = controller.request(method, path, body,
                                          headers={"Authorization": "Bearer wrong"})
        assert code == 401 and "Authorization: Bearer" in answer["error"]
    assert controller.request("GET", "/multicast/trees")[0] == 200   # GETs stay open on loopback
    token = {"Authorization": "Bearer sesame"}
    code, tree = post(controller, "/multicast/trees", TREE, **token)
    assert code == 201
    path = "/multicast/trees/%d" % tree["id"]
    for headers in ({}, dict(token, **{"X-Release-Key": "not-mine"})):
        code, answer = controller.request("DELETE", path, headers=headers)
        assert code in (401, 403) and listed(controller)["trees"]
    code, _ = controller.request("DELETE", path, headers=dict(token, **release_key(tree)))
    assert code == 200 and empty(controller)


@pytest.mark.parametrize("path", ["/multicast/trees", "/fabric/topology", "/fabric/links", "/jobs",
                                  "/ina/plans", "/selmcast/rounds", "/metrics", "/openapi.json",
                                  "/ui"])
def test_reads_from_beyond_loopback_need_the_token(controller, monkeypatch, path):
    """Every GET route, the operator's too, unless SYNCFABRIC_REST_OPEN_READS opens
    those three; a daemon's conditional GET /jobs as well."""
    monkeypatch.setenv("SYNCFABRIC_REST_TOKEN", "sesame")
    outside = "10.0.0.7"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"If-None-Match": "*"}):
        response = controller.response("GET", path, headers=headers, remote_addr=outside)
        assert response.status_int == 401 and b"reads from beyond loopback" in response.body
    token = {"Authorization": "Bearer sesame"}
    assert controller.response("GET", path, headers=token, remote_addr=outside).status_int == 200
    monkeypatch.setenv("SYNCFABRIC_REST_OPEN_READS", "1")
    opened = controller.response("GET", path, remote_addr=outside).status_int
    assert opened == (200 if path in ("/metrics", "/openapi.json", "/ui") else 401)


def test_a_token_file_is_read_and_listening_beyond_loopback_needs_a_token(monkeypatch, tmp_path):
    from ryu import cfg
    from apps import rest_json
    monkeypatch.setattr(cfg.CONF, "wsapi_host", "0.0.0.0", raising=False)
    with pytest.raises(SystemExit, match="listen on 0.0.0.0 without a token. Set SYNCFABRIC_REST_TOKEN"):
        rest_json.check_listening()
    secret = tmp_path / "token"
    secret.write_text("sesame\n")
    monkeypatch.setenv("SYNCFABRIC_REST_TOKEN_FILE", str(secret))
    rest_json.check_listening()
    assert rest_json.configured_token() == "sesame"
    monkeypatch.setenv("SYNCFABRIC_REST_TOKEN_FILE", str(tmp_path / "missing"))
    with pytest.raises(SystemExit, match="cannot be read"):
        rest_json.configured_token()


def test_of_concurrent_deletes_exactly_one_wins_and_nothing_is_left(controller):
    _, tree = post(controller, "/multicast/trees", TREE)
    _, plan = post(controller, "/ina/plans", {"job": "j", "workers": ["h1", "h2", "h3"],
                                              "ps": "h4", "gradient_mb": 1})
    _, round_ = post(controller, "/selmcast/rounds", {"job": "r", "workers": ["h1", "h2", "h3"],
                                                      "update_mb": 0.1, "p": 1})
    for path, answer in (("/multicast/trees/%d", tree), ("/ina/plans/%d", plan),
                         ("/selmcast/rounds/%d", round_)):
        call = ("DELETE", path % answer["id"], None, release_key(answer))
        assert concurrently(controller, [call] * 4) == [200, 404, 404, 404]
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def test_leases_expire_and_deletes_racing_them_leave_nothing(controller):
    trees = [post(controller, "/multicast/trees", dict(TREE, bandwidth_mbps=1, ttl_s=0.3))[1]
             for _ in range(3)]
    assert all(0 < t["reservation"]["expires_in_s"] <= 0.3 + 1e-9 for t in trees)   # float sums
    hub.sleep(0.25)
    statuses = concurrently(controller, [("DELETE", "/multicast/trees/%d" % t["id"], None,
                                          release_key(t)) for t in trees])
    assert set(statuses) <= {200, 404}
    _, tree = post(controller, "/multicast/trees", dict(TREE, ttl_s=0.2))
    deadline = time.monotonic() + 3
    while listed(controller)["trees"] and time.monotonic() < deadline:
        hub.sleep(0.1)
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def test_loading_a_new_fabric_releases_every_tree_and_plan(controller):
    post(controller, "/multicast/trees", TREE)
    post(controller, "/ina/plans", {"job": "j", "workers": ["h1", "h2"], "ps": "h4", "gradient_mb": 1})
    code, _ = controller.request("PUT", "/fabric/topology", description())
    assert code == 200
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    code, tree = post(controller, "/multicast/trees", dict(TREE, bandwidth_mbps=20))
    assert code == 201   # the new book starts empty
