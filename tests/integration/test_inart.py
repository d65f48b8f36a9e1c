"""InArt for real: ryu-manager + OVS + Mininet on the InArt paper's toy (two switches, two
PSs): a job whose model InArt's policies (and its baselines) split between the PSs, with
whole-number gradients and every sum checked; and the INA plans API's answers."""

import pytest

from experiments.traffic.policy_rounds import policy_job, run_policy_rounds
from mininet_topos.inart_example import InartExampleTopo
from tests.harness.testbeds import running_testbed

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16661, 18088
WORKERS = ["w%d" % i for i in range(1, 7)]
GRADIENT_MB = 0.2


@pytest.fixture(scope="module")
def bed():
    yield from running_testbed(InartExampleTopo(), OF_PORT, REST_PORT)


def post_plan(bed, **fields):
    body = dict({"job": "test", "workers": WORKERS, "ps": ["s1", "s2"],
                 "gradient_mb": GRADIENT_MB, "policy": "inart"}, **fields)
    return bed.client.request("POST", "/ina/plans", body)


@pytest.mark.parametrize("policy", ["inart", "atp", "lbmm", "equal-split"])
def test_a_two_ps_job_returns_exact_sums_of_both_shares_and_leaves_nothing(bed, policy):
    _job, plan, (result,) = run_policy_rounds(
        bed, policy_job(WORKERS, ["s1", "s2"], policy, GRADIENT_MB), 1)
    assert set(plan["ports"]) == {"s1", "s2"} and len(set(plan["ports"].values())) == 2
    assert sum(plan["split"].values()) == pytest.approx(1.0)
    assert result["verified"] is True
    if policy != "lbmm":
        assert plan["aggregates"] and {a["ps"] for a in plan["aggregates"]} <= {"s1", "s2"}
    else:
        assert plan["aggregates"] == []
    assert bed.client.get("/jobs") == {"jobs": []}
    assert bed.client.get("/ina/plans") == {"plans": []}
    assert bed.leftovers() == {}


def test_the_toy_plans_at_the_planners_rates(bed):
    rates = {}
    for policy in ("inart", "lbmm"):
        plan = post_plan(bed, policy=policy)
        rates[policy] = plan["theta_mbps"]
        bed.client.request("DELETE", "/ina/plans/%d" % plan["id"])
    assert rates["lbmm"] == pytest.approx(4 / 3)
    assert rates["inart"] >= 2.5


@pytest.mark.parametrize("fields, status, words", [
    ({"ps": ["s1", "s1"]}, 400, "distinct"),
    ({"ps": ["s1", "s2"], "policy": "grid"}, 400, "plans for one PS"),
    ({"ps": "w1"}, 400, "not a worker"),   # several PSs may be workers, one may not
    ({"ps": ["s1", "nowhere"]}, 404, "unknown host"),
    ({"ps": []}, 400, "ps must be"),
])
def test_bad_multi_ps_requests_are_refused_and_change_nothing(bed, fields, status, words):
    from syncfabric.hosts.transport.controller_client import ControllerHttpError
    with pytest.raises(ControllerHttpError) as error:
        post_plan(bed, **fields)
    assert error.value.status == status and words in error.value.body["error"]
    assert bed.client.get("/ina/plans") == {"plans": []}
