"""GRID steering for real: ryu-manager (INA + fabric apps) + OVS + Mininet on the GRID
paper's triangle, with real gradients through aggregator hosts."""

import re
import subprocess

import pytest

from experiments.traffic.gradients import run_gradient_rounds
from mininet_topos.grid_example import GridExampleTopo
from tests.harness.testbeds import running_testbed

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16659, 18086
WORKERS = ["w%d" % i for i in range(1, 9)]
GRADIENT_MB = 0.2


@pytest.fixture(scope="module")
def bed():
    yield from running_testbed(GridExampleTopo(), OF_PORT, REST_PORT)


def post_plan(bed, **fields):
    body = dict({"job": "test", "workers": WORKERS, "ps": "ps", "gradient_mb": GRADIENT_MB}, **fields)
    return bed.client.request("POST", "/ina/plans", body)


def steering_packets(switch):
    """{(src ip, dst ip): packets} of the steering flows on `switch`."""
    output = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", switch,
                             "table=1,cookie=0x5346000300000000/0xffffffff00000000"],
                            capture_output=True, text=True, check=True).stdout
    counts = {}
    for line in output.splitlines():
        match = re.search(r"n_packets=(\d+).*nw_src=([\d.]+),nw_dst=([\d.]+)", line)
        if match:
            key = (match.group(2), match.group(3))
            counts[key] = counts.get(key, 0) + int(match.group(1))
    return counts


def test_gradients_reach_the_chosen_aggregators_and_the_ps_sum_is_exact(bed):
    plan = post_plan(bed, policy="grid")
    try:
        assert plan["theta_mbps"] == pytest.approx(3.0)
        (result,) = run_gradient_rounds(bed, plan, 1, GRADIENT_MB)
        assert result["verified"] is True and result["error_to_bound"] <= 1
        # every aggregator in the plan received its workers' fragments ...
        assert set(plan["aggregators"]) == {"agg-s1", "agg-s2", "agg-s3"}
        for aggregator, info in plan["aggregators"].items():
            assert result["aggregator_bytes"][aggregator] >= 0.2e6 * len(info["workers"])
        # ... and the switches counted them on the planned paths
        ip = plan["addresses"]
        for worker, legs in plan["workers"].items():
            (leg,) = legs
            first_switch = leg["path"][1]
            assert steering_packets(first_switch)[ip[worker], ip[leg["node"]]] > 0
        crossing = [w for w, (leg,) in plan["workers"].items() if leg["path"][1:3] == ["s1", "s2"]]
        assert len(crossing) == 1 and steering_packets("s2")[ip[crossing[0]], ip["agg-s2"]] > 0
    finally:
        bed.client.request("DELETE", "/ina/plans/%d" % plan["id"])
    assert bed.leftovers() == {}


def test_nearest_splits_a_gradient_between_aggregator_and_ps_and_the_sum_stays_exact(bed):
    plan = post_plan(bed, policy="nearest")
    try:
        assert plan["theta_mbps"] == pytest.approx(2.4375)
        assert [leg["node"] for leg in plan["workers"]["w1"]] == ["agg-s1", "ps"]
        (result,) = run_gradient_rounds(bed, plan, 1, GRADIENT_MB)
        assert result["verified"] is True
    finally:
        bed.client.request("DELETE", "/ina/plans/%d" % plan["id"])
    assert bed.leftovers() == {}


