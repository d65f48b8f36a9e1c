"""Training for real in the papers' modes, each a job (POST /jobs) on a 2x2 Mininet
fabric under ryu-manager: one PS (h4), the gradients straight to it or summed in the
spines' aggregators, the sums back by unicast or multicast. Two rounds of a small MLP
give the one-process model, and the PS's switch port counts what the seeds describe:
by unicast the PS sends a copy of the sums to each worker, by multicast one."""

import pytest

from experiments.traffic.jobs import PAPERS_MODES, papers_job
from experiments.traffic.training_jobs import run_job_training
from syncfabric.hosts.training.digits_mlp import TrainingSetup
from mininet_topos.spineleaf import SpineLeafTopo
from tests.harness.testbeds import running_testbed

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16660, 18087
WORKERS, PS = ["h1", "h2", "h3"], "h4"
SMALL = TrainingSetup(workers=len(WORKERS), hidden=64, batch=8)   # 36 KB of float32s


@pytest.fixture(scope="module")
def bed():
    """2x2, 20 Mbit/s links, and aggregators on the spines that take two workers' 20 Mbit/s
    (the GRID paper's 9 Mbit/s would gain nothing on so small a fabric)."""
    yield from running_testbed(SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, bw=20,
                                             aggregators="spines", aggregator_bw=40),
                               OF_PORT, REST_PORT)


@pytest.mark.parametrize("mode", PAPERS_MODES)
def test_two_rounds_give_the_reference_model_and_the_ps_sends_its_copies(bed, mode):
    request = papers_job(mode, PS, WORKERS, SMALL.parameter_count)
    results = run_job_training(bed, request, SMALL, rounds=2, watched=PS)
    assert [r["round"] for r in results] == [1, 2]
    for result in results:
        assert result["verified"] is True and result["error_to_tolerance"] <= 1.0
        assert result["test_accuracy"] == result["reference_accuracy"]
        assert result["aggregate_s"] > 0
        if mode.endswith("+ps"):
            assert result["aggregators_used"] == 0
        elif mode == "multicast+ina":   # by unicast, the PS's uplink bounds the round: the
            assert result["aggregators_used"] > 0   # aggregators gain nothing, and are left out
    assert results[1]["loss"] == pytest.approx(results[1]["reference_loss"], rel=1e-5)
    # what the PS's link carried a round, in models: headers and hellos add a little
    model_mb = SMALL.parameter_count * 4 / 1e6
    copies = len(WORKERS) if mode.startswith("unicast") else 1
    assert copies <= results[0]["ps_uplink_mb"] / model_mb < copies * 1.25
    if mode.endswith("+ps"):   # every worker's gradient reaches the PS itself
        assert len(WORKERS) <= results[0]["ps_downlink_mb"] / model_mb < len(WORKERS) * 1.25
    assert bed.client.get("/jobs") == {"jobs": []}
    assert bed.client.get("/multicast/trees") == {"trees": []}
    assert bed.client.get("/ina/plans") == {"plans": []}
    assert bed.leftovers() == {}
