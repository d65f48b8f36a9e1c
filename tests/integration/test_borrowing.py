"""Borrowing for real (docs/sharing.md): two jobs share the one spine of a 2-leaf fabric
at 10 Mbit/s under the fair policy, each with a floor of half the link, on switches and
hosts that serve the borrowed class below the guaranteed one. While the other job is
idle, a job that may borrow takes the idle half: its rounds beat what its floor
predicts, its borrowed datagrams counted, every sum exact. With borrowing off, the same
rounds keep to the floor. Two jobs that compute half the time take turns when the fabric
interleaves them: one period, windows apart, every round started in its window while
both run.
Nothing is left on the switches."""

import statistics
import time

import pytest

from experiments.traffic.jobs import program_lines, start_workers
from syncfabric.hosts.jobs.phase_windows import LATE_FRACTION
from mininet_topos.data_plane import DataPlane
from mininet_topos.spineleaf import SpineLeafTopo
from tests.harness.testbeds import running_testbed

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16673, 18100
FIRST, SECOND = ["h1", "h3"], ["h2", "h4"]   # leaf1 and leaf2 each: both cross the spine
MODEL_BYTES = 800_000
ROUNDS = 8
INTERLEAVED_ROUNDS = 24   # the windows are planned from the first rounds: judged on the rest
START_S = 4.0             # the workers of both jobs start together, this long after asked


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


def rounds_computing(bed, jobs, rounds, compute_s):
    """Each job of `jobs` (its workers) admitted, its workers running `rounds` rounds
    compute_s apart, all starting together: [(its last report, {worker: round lines})]."""
    admitted = [bed.client.request("POST", "/jobs", colocated(workers)) for workers in jobs]
    try:
        start_at = time.time() + START_S
        running = [(job, start_workers(bed, job, rounds, start_at=start_at, compute_s=compute_s))
                   for job in admitted]
        lines = [program_lines(processes, job, timeout_s=(3 + 2 * compute_s) * rounds)
                 for job, processes in running]
        reports = [bed.client.get("/jobs/%d" % job["id"]) for job in admitted]
    finally:
        for job in admitted:
            bed.client.request("DELETE", "/jobs/%d" % job["id"])
    return [(report, {w: printed[:-1] for w, printed in found.items()})
            for report, found in zip(reports, lines)]


def while_both_run(lines, *jobs_lines):
    """Of one job's round lines ({worker: lines}), those started before every job of
    `jobs_lines` started its last round: once a job's workers are quiet, the other runs
    alone, and a job alone has no window."""
    until = min(max(r["started_at"] for printed in job.values() for r in printed)
                for job in jobs_lines)
    return {w: [r for r in printed if r["started_at"] <= until] for w, printed in lines.items()}


def test_two_jobs_that_compute_half_the_time_take_turns(bed):
    """Each job computes as long as its round takes alone; interleaved, the two share one
    period with windows apart, and once the windows are planned every round started
    while both run starts in its job's window (at its start, or late by less than
    LATE_FRACTION of the period).
    How close each job comes to its iteration alone is a figure, not asserted here: 1.05x
    in 5 runs of 6, 1.2x in one (docs/sharing.md, "Interleaving")."""
    bed.client.put("/fabric/policy", {"policy": "fair", "borrow": True})
    alone = bed.client.request("POST", "/jobs", colocated(FIRST))
    compute_s = alone["predicted_round_s"]   # the whole link: its round alone
    bed.client.request("DELETE", "/jobs/%d" % alone["id"])
    bed.client.put("/fabric/policy", {"policy": "fair", "interleave": True})
    try:
        shared = rounds_computing(bed, [FIRST, SECOND], INTERLEAVED_ROUNDS, compute_s)
    finally:
        bed.client.put("/fabric/policy", {"policy": "fair"})
    (_first, first_lines), (_second, second_lines) = shared
    both = [while_both_run(lines, first_lines, second_lines)
            for lines in (first_lines, second_lines)]
    # the windows of the last rounds each job started while the other ran
    first, second = (lines[sorted(lines)[0]][-1] for lines in both)
    assert first["period_s"] == second["period_s"] and first["period_s"] > 0
    apart = abs(first["phase_offset_s"] - second["phase_offset_s"])
    assert min(apart, first["period_s"] - apart) >= 0.5 * compute_s, (first, second)
    for lines, running in zip((first_lines, second_lines), both):
        assert all(r["exact"] for printed in lines.values() for r in printed)
        later = running[sorted(running)[0]][INTERLEAVED_ROUNDS // 2:]
        assert len(later) >= INTERLEAVED_ROUNDS // 4, running
        phases = [(r["started_at"] - r["phase_offset_s"]) % r["period_s"] / r["period_s"]
                  for r in later if r["period_s"]]
        assert len(phases) == len(later), later
        assert all(phase <= LATE_FRACTION + 0.02 or phase >= 0.98 for phase in phases), phases
    assert bed.leftovers() == {}
