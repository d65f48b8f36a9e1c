"""Borrowing for real (docs/sharing.md): two jobs share the one spine of a 2-leaf fabric
at 10 Mbit/s under the fair policy, each with a floor of half the link, on switches and
hosts that serve the borrowed class below the guaranteed one. While the other job is
idle, a job that may borrow takes the idle half: its rounds beat what its floor
predicts, its borrowed datagrams counted, every sum exact. With borrowing off, the same
rounds keep to the floor. Nothing is left on the switches."""

import statistics

import pytest

from experiments.traffic.jobs import program_lines, start_workers
from mininet_topos.data_plane import DataPlane
from mininet_topos.spineleaf import SpineLeafTopo
from tests.harness.testbeds import running_testbed

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16673, 18100
FIRST, SECOND = ["h1", "h3"], ["h2", "h4"]   # leaf1 and leaf2 each: both cross the spine
MODEL_BYTES = 800_000
ROUNDS = 8


@pytest.fixture(scope="module")
def bed():
    yield from running_testbed(SpineLeafTopo(spines=1, leaves=2, hosts_per_leaf=2, bw=10),
                               OF_PORT, REST_PORT, DataPlane(traffic_classes=True))


def colocated(workers):
    return {"workers": workers, "model_bytes": MODEL_BYTES, "placement": "colocated",
            "aggregation": False}


def rounds_beside_an_idle_job(bed, borrow):
    """The first job's report and its workers' round lines, run while the second, its
    floor booked beside it, sends nothing."""
    bed.client.put("/fabric/policy", {"policy": "fair", "borrow": borrow})
    first = bed.client.request("POST", "/jobs", colocated(FIRST))
    second = bed.client.request("POST", "/jobs", colocated(SECOND))
    try:
        report = bed.client.get("/jobs/%d" % first["id"])
        lines = program_lines(start_workers(bed, report, ROUNDS), report)
    finally:
        for job in (first, second):
            bed.client.request("DELETE", "/jobs/%d" % job["id"])
    bed.client.put("/fabric/policy", {"policy": "fair"})
    return report, [r for printed in lines.values() for r in printed[:-1]]


def test_a_job_borrows_what_an_idle_job_leaves_and_keeps_its_floor_without(bed):
    capped, capped_rounds = rounds_beside_an_idle_job(bed, borrow=False)
    lending, lent_rounds = rounds_beside_an_idle_job(bed, borrow=True)
    assert capped["borrow"] is None and lending["borrow"]["dscp"] == 1
    for report in (capped, lending):   # each job's floor: half the spine's links
        assert report["rate_mbps"] == pytest.approx(report["fair_share_mbps"])
        assert report["rate_mbps"] < 0.6 * 10
    assert all(r["exact"] for r in capped_rounds + lent_rounds)
    assert sum(r["borrowed"] for r in capped_rounds) == 0
    assert sum(r["borrowed"] for r in lent_rounds) > 0
    predicted = lending["predicted_round_s"]
    capped_s = statistics.median(r["seconds"] for r in capped_rounds)
    lent_s = statistics.median(r["seconds"] for r in lent_rounds)
    assert capped_s >= 0.9 * predicted, (capped_s, predicted)
    assert lent_s <= 0.8 * capped_s, (lent_s, capped_s)
    assert bed.leftovers() == {}
