"""GRID steering for real: ryu-manager + OVS + Mininet on the GRID paper's triangle, a job
whose gradients a named policy plans (POST /jobs with the PS and the policy), with
whole-number gradients through the aggregator hosts and every sum checked."""

import re
import subprocess

import pytest

from experiments.traffic.policy_rounds import policy_job, run_policy_rounds
from mininet_topos.grid_example import GridExampleTopo
from tests.harness.testbeds import running_testbed

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16659, 18086
WORKERS = ["w%d" % i for i in range(1, 9)]
GRADIENT_MB = 0.2


@pytest.fixture(scope="module")
def bed():
    yield from running_testbed(GridExampleTopo(), OF_PORT, REST_PORT)


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


def test_gradients_reach_the_chosen_aggregators_and_every_sum_is_exact(bed):
    counted = {}

    def count(_job, plan):
        counted.update(plan=plan, packets={s: steering_packets(s) for s in ("s1", "s2", "s3")})
    _job, plan, (result,) = run_policy_rounds(
        bed, policy_job(WORKERS, ["ps"], "grid", GRADIENT_MB), 1, before_release=count)
    assert plan["theta_mbps"] == pytest.approx(3.0)
    assert result["verified"] is True
    # every aggregator in the plan took its workers' fragments, on the planned paths
    assert set(plan["aggregators"]) == {"agg-s1", "agg-s2", "agg-s3"}
    ip = plan["addresses"]
    for worker, legs in plan["workers"].items():
        (leg,) = legs
        assert counted["packets"][leg["path"][1]][ip[worker], ip[leg["node"]]] > 0
    crossing = [w for w, (leg,) in plan["workers"].items() if leg["path"][1:3] == ["s1", "s2"]]
    assert len(crossing) == 1 and counted["packets"]["s2"][ip[crossing[0]], ip["agg-s2"]] > 0
    assert bed.client.get("/jobs") == {"jobs": []} and bed.leftovers() == {}


def test_nearest_splits_a_gradient_between_aggregator_and_ps_and_the_sum_stays_exact(bed):
    _job, plan, (result,) = run_policy_rounds(
        bed, policy_job(WORKERS, ["ps"], "nearest", GRADIENT_MB), 1)
    assert plan["theta_mbps"] == pytest.approx(2.4375)
    assert [leg["node"] for leg in plan["workers"]["w1"]] == ["agg-s1", "ps"]
    assert result["verified"] is True
    assert bed.client.get("/jobs") == {"jobs": []} and bed.leftovers() == {}
