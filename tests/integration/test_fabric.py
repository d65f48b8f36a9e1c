"""The fabric controller for real: ryu-manager + OVS (userspace) + Mininet on a 2x2 spine-leaf."""

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from experiments.host_measurements import ping_all_loss_pct, tcp_throughput_mbps
from experiments.ovs import ofctl_lines
from experiments.controller_process import wait_until
from experiments.testbed import FabricTestbed
from mininet_topos.description import describe
from mininet_topos.platform_net import management_network_exists
from mininet_topos.spineleaf import SpineLeafTopo
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.unicast_routes import host_pair_paths, unicast_rules
from syncfabric.hosts.transport.controller_client import ControllerHttpError
from syncfabric.openflow.builders import FABRIC_COOKIE
from tests.harness.testbeds import bridges, controllers_on_port, require_root

pytestmark = pytest.mark.integration

LINK_MBPS = 20
OF_PORT, REST_PORT = 16653, 18080


@pytest.fixture(scope="module")
def bed():
    require_root()
    topo = SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, bw=LINK_MBPS)
    with FabricTestbed(topo, of_port=OF_PORT, rest_port=REST_PORT) as testbed:
        testbed.view = FabricView(describe(topo))
        yield testbed
    assert not bridges() & set(topo.switches()), "bridges left behind"
    assert not management_network_exists(), "management bridge left behind"
    assert not controllers_on_port(OF_PORT), "controller left running"


def fabric_flows(switch):
    """The fabric app's flows on one bridge as ovs-ofctl prints them, without counters."""
    return sorted(ofctl_lines("dump-flows", "--no-stats", switch, "cookie=%#x/-1" % FABRIC_COOKIE))


def test_all_host_pairs_ping(bed):
    assert ping_all_loss_pct(bed.net) == 0.0


def test_tcp_between_leaves_reaches_link_rate(bed):
    # a second run only if the first fell short: this machine kind has slow spells
    # (14-16 of 20 Mbit/s for a few seconds) that are not the fabric's
    assert any(tcp_throughput_mbps(bed.host("h1"), bed.host("h3"), seconds=3) >= 0.8 * LINK_MBPS
               for _attempt in range(2))


def test_rest_topology_matches_the_built_fabric(bed):
    report = bed.client.get("/fabric/topology")
    assert report["unknown_dpids"] == []
    assert all(s.pop("connected") and s.pop("synced") for s in report["switches"])
    del report["unknown_dpids"]
    assert report == bed.view.to_description()
    assert len(report["switches"]) == 4 and len(report["links"]) == 4 and len(report["hosts"]) == 4


def test_switches_hold_the_flows_the_controller_computed(bed):
    rules = unicast_rules(bed.view)
    for switch in bed.view.switches:
        expected = (len([r for r in rules if r.switch == switch]) + len(bed.view.host_ports(switch))
                    + len(bed.view.fabric_ports(switch)) + 1)   # admission: passes
        assert len(fabric_flows(switch)) == expected, switch


def test_link_utilization_rises_while_traffic_flows(bed):
    path = host_pair_paths(bed.view)["h1", "h3"]          # e.g. leaf1 -> spineX -> leaf2
    other_spine = ({"spine1", "spine2"} - {path[1]}).pop()

    def utilization():
        links = bed.client.get("/fabric/links")["links"]
        return {(l["src"], l["dst"]): l["utilization"] or 0.0 for l in links}

    def measured():
        """(TCP rate, utilization while it flowed)."""
        # earlier traffic may still be in the statistics window
        wait_until(lambda: utilization()["leaf1", path[1]] <= 0.1, 10, "the link to go idle")
        with ThreadPoolExecutor(1) as pool:
            flow = pool.submit(tcp_throughput_mbps, bed.host("h1"), bed.host("h3"), 6)
            time.sleep(4)
            return flow.result(), utilization()

    rate, busy = measured()
    if rate <= 0.8 * LINK_MBPS:   # once more: this machine kind has slow spells
        rate, busy = measured()
    assert rate > 0.8 * LINK_MBPS
    for link in (("h1", "leaf1"), ("leaf1", path[1]), (path[1], "leaf2"), ("leaf2", "h3")):
        assert busy[link] > 0.7, (link, busy[link])
    assert busy["leaf1", other_spine] < 0.1


def test_bad_topology_requests_change_nothing(bed):
    before = bed.client.get("/fabric/topology")
    flows_before = {s: fabric_flows(s) for s in bed.view.switches}
    with pytest.raises(ControllerHttpError) as malformed:
        bed.client.request("PUT", "/fabric/topology", raw_body=b"{not json")
    assert malformed.value.status == 400 and "malformed JSON" in malformed.value.body["error"]
    broken = describe(bed.topo)
    broken["links"][0]["b"] = "spine9"
    with pytest.raises(ControllerHttpError) as invalid:
        bed.client.put("/fabric/topology", broken)
    assert invalid.value.status == 400 and "unknown switch 'spine9'" in invalid.value.body["error"]
    assert bed.client.get("/fabric/topology") == before
    assert {s: fabric_flows(s) for s in bed.view.switches} == flows_before


def test_controller_log_says_what_it_did(bed):
    log = bed.controller_log()
    assert "fabric loaded: 4 switches, 4 hosts" in log
    assert log.count("reconciled, synced") >= 4
