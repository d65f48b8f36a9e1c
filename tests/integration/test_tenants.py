"""Two jobs on one Mininet fabric under ryu-manager (two leaves under one spine, 20
Mbit/s), with the default fair policy: admitting the second, whose workers cross the
same spine, moves the first down
between its rounds (its workers pace at the new rates from the round the controller
named, no round lost and every sum exact); releasing the second grows the first back.
Nothing is left on the switches."""

import time

import pytest

from experiments.traffic.jobs import program_lines, start_workers
from mininet_topos.spineleaf import SpineLeafTopo
from tests.harness.testbeds import running_testbed

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16671, 18098
FIRST, SECOND = ["h1", "h3"], ["h2", "h4"]   # leaf1 and leaf2 each: both cross the spine
MODEL_BYTES = 800_000
FIRST_ROUNDS, SECOND_ROUNDS = 30, 8


@pytest.fixture(scope="module")
def bed():
    yield from running_testbed(SpineLeafTopo(spines=1, leaves=2, hosts_per_leaf=2, bw=20),
                               OF_PORT, REST_PORT)


def colocated(workers):
    return {"workers": workers, "model_bytes": MODEL_BYTES, "placement": "colocated",
            "aggregation": False}


def test_a_second_job_moves_the_first_down_between_rounds_and_its_release_back(bed):
    first = bed.client.request("POST", "/jobs", colocated(FIRST))
    running = start_workers(bed, first, FIRST_ROUNDS)
    try:
        time.sleep(4.0)   # a few of its rounds at its rate alone
        second = bed.client.request("POST", "/jobs", colocated(SECOND))
        shrunk = bed.client.get("/jobs/%d" % first["id"])
        second_lines = program_lines(start_workers(bed, second, SECOND_ROUNDS), second)
        bed.client.request("DELETE", "/jobs/%d" % second["id"])
        grown = bed.client.get("/jobs/%d" % first["id"])
        first_lines = program_lines(running, first, timeout_s=180)
    finally:
        for process in running.values():
            if process.poll() is None:
                process.kill()
        bed.client.request("DELETE", "/jobs/%d" % first["id"])
    assert (shrunk["generation"], grown["generation"]) == (2, 3)
    assert shrunk["rate_mbps"] < 0.7 * first["rate_mbps"]
    assert grown["rate_mbps"] == pytest.approx(first["rate_mbps"], rel=0.03)
    for lines, rounds in ((first_lines, FIRST_ROUNDS), (second_lines, SECOND_ROUNDS)):
        assert {w: [r["round"] for r in printed[:-1]] for w, printed in lines.items()} == \
            {w: list(range(1, rounds + 1)) for w in lines}   # no round lost
        assert all(r["exact"] for printed in lines.values() for r in printed[:-1])
    # every worker paced each round at the rates of that round's generation
    shrunk_from, grown_from = shrunk["effective_round"], grown["effective_round"]
    assert 1 < shrunk_from < grown_from <= FIRST_ROUNDS, (shrunk_from, grown_from)
    for worker, printed in first_lines.items():
        planned = {r["round"]: r["planned_first_pass_s"] for r in printed[:-1]}
        alone, shared = planned[shrunk_from - 1], planned[shrunk_from]
        assert shared == pytest.approx(alone * first["rate_mbps"] / shrunk["rate_mbps"], rel=0.05)
        assert planned[grown_from] == pytest.approx(alone, rel=0.05), worker
        assert planned[grown_from - 1] == pytest.approx(shared, rel=0.05), worker
    assert bed.leftovers() == {}
