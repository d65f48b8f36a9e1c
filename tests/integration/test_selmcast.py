"""SELMCAST for real: ryu-manager (selmcast + multicast + fabric apps) + OVS + Mininet, 2x2 spine-leaf."""

import pytest

from experiments.traffic.peer_sync import run_peer_sync
from mininet_topos.spineleaf import SpineLeafTopo
from syncfabric.hosts.packets.wire import model_bytes, wire_bytes
from tests.harness.testbeds import running_testbed

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16658, 18085
SWITCHES = ("spine1", "spine2", "leaf1", "leaf2")
NOTHING = {switch: [] for switch in SWITCHES}
WORKERS = ["h1", "h2", "h3", "h4"]
HOST_RATES = [20, 10, 15, 20]


@pytest.fixture(scope="module")
def bed():
    yield from running_testbed(SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, bw=20,
                                             host_bw=HOST_RATES), OF_PORT, REST_PORT)


def multicast_state(bed):
    return dict(NOTHING, **bed.leftovers())


def test_a_round_delivers_every_update_to_exactly_the_selected_receivers(bed):
    request = {"job": "delivery", "p": 2, "cost_model": "L3"}
    (result,) = run_peer_sync(bed, WORKERS, 0.3, [request])
    plan = result["plan"]
    assert result["verified"] is True
    assert all(len(receivers) >= 2 and sender not in receivers
               for sender, receivers in plan["assignment"].items())
    # one tree per sender, whose receivers are exactly its selected receivers
    assert {tree["source"]: sorted(tree["receivers"]) for tree in plan["trees"]} == {
        sender: sorted(receivers) for sender, receivers in plan["assignment"].items()}
    assert result["deliveries"] == sum(map(len, plan["assignment"].values()))
    # reserved at v_i / t on host links whose capacities differ; v_i is the update's wire size
    update_mbit = wire_bytes(len(model_bytes(0.3))) * 8 / 1e6
    assert all(tree["bandwidth_mbps"] == pytest.approx(update_mbit / plan["t_s"])
               for tree in plan["trees"])
    assert plan["t_s"] >= plan["lower_bound_s"] * (1 - 1e-9)
    assert bed.client.get("/selmcast/rounds") == {"rounds": []}
    assert bed.client.get("/multicast/trees") == {"trees": []}
    assert multicast_state(bed) == NOTHING


