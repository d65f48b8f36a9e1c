"""Drops counted where they happen, on a real fabric: a multicast sent at five times its
reservation loses what the meters drop, a port sent three times its rate loses what its
queue drops, and nothing else goes uncounted."""

import re
import subprocess
import types

import pytest

from experiments import calibrate
from experiments.testbed import FabricTestbed
from mininet_topos.data_plane import DataPlane, ovs_transmit_buffer
from mininet_topos.platform_net import shape_links, switch_ports
from mininet_topos.spineleaf import SpineLeafTopo
from tests.harness.testbeds import require_root

OF_PORT, REST_PORT = 16670, 18097
LINK_MBPS, RESERVED_MBPS = 20.0, 2.0


@pytest.mark.integration
def test_an_overloaded_multicast_reports_its_drops_by_layer():
    require_root()
    topo = SpineLeafTopo(spines=1, leaves=2, hosts_per_leaf=2, bw=LINK_MBPS)
    args = calibrate.parse_args(["--seconds", "2", "--of-port", str(OF_PORT),
                                 "--rest-port", str(REST_PORT)])
    with FabricTestbed(topo, of_port=OF_PORT, rest_port=REST_PORT) as bed:
        hosts = topo.hosts(sort=True)
        calibration = calibrate.Calibration(bed, args, hosts)

        def overloaded(self, pattern, progress):
            """One trial instead of the bisection: 19 Mbit/s into a 2 Mbit/s tree."""
            shape_links(bed.net, LINK_MBPS)
            tree = bed.client.request("POST", "/multicast/trees", {
                "source": hosts[0], "receivers": hosts[1:], "bandwidth_mbps": RESERVED_MBPS})
            try:
                return 0.0, True, [self._send("multicast", LINK_MBPS, tree["address"])]
            finally:
                bed.client.request("DELETE", "/multicast/trees/%d" % tree["id"])
        calibration.highest_clean_rate = types.MethodType(overloaded, calibration)
        (trial,) = calibration.run()["multicast"]["trials"]
        transmit_buffer = ovs_transmit_buffer(subprocess.run(
            ["ss", "-0", "-m", "-p", "-n"], capture_output=True, text=True).stdout)
    assert transmit_buffer == DataPlane().ovs_send_buffer
    assert trial["loss"] > 0.8, trial                   # what passed is the reservation's
    assert trial["drops"]["meter"] > 0 and "meter:" in trial["dropped_at"], trial
    assert trial["unexplained_loss"] < 0.001, trial


@pytest.mark.integration
def test_a_port_sent_three_times_its_rate_loses_only_what_its_queue_counts():
    require_root()
    topo = SpineLeafTopo(spines=1, leaves=2, hosts_per_leaf=2, bw=LINK_MBPS)
    args = calibrate.parse_args(["--seconds", "3", "--patterns", "all-to-one", "--of-port",
                                 str(OF_PORT), "--rest-port", str(REST_PORT)])
    with FabricTestbed(topo, of_port=OF_PORT, rest_port=REST_PORT) as bed:
        calibration = calibrate.Calibration(bed, args, topo.hosts(sort=True))

        def overloaded(self, pattern, progress):
            """Three hosts at their link rate into the fourth's link."""
            shape_links(bed.net, LINK_MBPS)
            return 0.0, True, [self._send("all-to-one", 3 * LINK_MBPS, None)]
        calibration.highest_clean_rate = types.MethodType(overloaded, calibration)
        (trial,) = calibration.run()["all-to-one"]["trials"]
        queues = subprocess.run(["tc", "qdisc", "show"], capture_output=True, text=True).stdout
    port_queue = "pfifo_head_drop 10: .* limit %dp" % DataPlane().switch_queue
    assert len(re.findall(port_queue, queues)) == switch_ports(topo) == 8
    assert trial["loss"] > 0.3, trial                   # 57 Mbit/s into 20, for 3 s
    assert trial["drops"]["qdisc"] > 0 and trial["drops"]["ovs-transmit"] == 0, trial
    assert trial["unexplained_loss"] < 0.001, trial
