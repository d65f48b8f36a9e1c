"""The controller's apps in-process on fake switches (tests/fake_controller.py): what they
answer, what the switches end up holding, and what is left after refusals, races,
reroutes and reconnections. No root, no Open vSwitch."""

import pytest

from apps import openflow_builders as of
from mininet_topos.description import describe
from mininet_topos.spineleaf import SpineLeafTopo
from tests.fake_controller import InProcessController
from tests.fake_openflow import multicast_walk

TREE = {"source": "h1", "receivers": ["h2", "h3", "h4"], "bandwidth_mbps": 5}


def description(spines=2, leaves=2, hosts_per_leaf=2):
    return describe(SpineLeafTopo(spines=spines, leaves=leaves, hosts_per_leaf=hosts_per_leaf,
                                  bw=20, aggregators="spines", aggregator_bw=9))


@pytest.fixture
def controller():
    controller = InProcessController(description())
    yield controller
    controller.close()


def empty(controller):
    """No tree or plan state on any switch, nothing booked."""
    return (all(s == {"flows": [], "groups": [], "meters": []} for s in controller.state().values())
            and dict(controller.services.fabric.ledger.reserved_mbps) == {})


def delivered(controller, tree):
    packet = {"eth_type": of.ETH_TYPE_IPV4, "ipv4_src": controller.view.ip(tree["source"]),
              "ipv4_dst": tree["address"]}
    return multicast_walk(controller.view, controller.tables(), tree["source"], packet)


def test_every_switch_syncs_and_a_tree_reaches_its_receivers_then_leaves_nothing(controller):
    topology = controller.request("GET", "/fabric/topology")[1]
    assert all(s["connected"] and s["synced"] for s in topology["switches"])
    status, tree = controller.request("POST", "/multicast/trees", TREE)
    assert status == 201, tree
    assert delivered(controller, tree) == {"h2", "h3", "h4"}
    status, answer = controller.request("DELETE", "/multicast/trees/%d" % tree["id"],
                                        headers={"X-Release-Key": tree["release_key"]})
    assert status == 200 and answer["released"]["id"] == tree["id"]
    assert empty(controller)
