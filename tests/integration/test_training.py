"""Training for real: two rounds of a tiny MLP in every mode, on the GRID paper's triangle
(ryu-manager with our apps, OVS, Mininet), every byte through the fabric."""

import pytest

from experiments.traffic.training import MODES, run_training
from mininet_topos.grid_example import GridExampleTopo
from syncfabric.hosts.digits_mlp import TrainingSetup
from tests.harness.testbeds import running_testbed

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16660, 18087
WORKERS = ["w%d" % i for i in range(1, 9)]
TINY = TrainingSetup(workers=len(WORKERS), hidden=16, batch=8)


@pytest.fixture(scope="module")
def bed():
    yield from running_testbed(GridExampleTopo(), OF_PORT, REST_PORT)


@pytest.mark.parametrize("mode", MODES)
def test_two_rounds_give_the_reference_parameters_and_leave_nothing(bed, mode):
    results = run_training(bed, "ps", WORKERS, mode, TINY, rounds=2, rate_mbps=2.5)
    assert [r["round"] for r in results] == [1, 2]
    for result in results:
        assert result["verified"] is True and result["error_to_tolerance"] <= 1.0
        assert result["test_accuracy"] == result["reference_accuracy"]
        assert result["param_s"] > 0 and result["aggregate_s"] > 0
        assert (result["aggregators_used"] > 0) == mode.endswith("+ina")
    assert results[1]["loss"] == pytest.approx(results[1]["reference_loss"], rel=1e-5)
    assert bed.client.get("/multicast/trees") == {"trees": []}
    assert bed.client.get("/ina/plans") == {"plans": []}
    assert bed.leftovers() == {}

