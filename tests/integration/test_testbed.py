"""FabricTestbed tears down whatever it started: when start-up fails, and when it stops."""

import pytest

from experiments.testbed import FabricTestbed
from mininet_topos.platform_net import PlatformError, leftovers, live_run_pids
from mininet_topos.spineleaf import SpineLeafTopo
from tests.harness.testbeds import bridges, controllers_on_port, require_root

pytestmark = pytest.mark.integration
OF_PORT, REST_PORT = 16655, 18082


def test_controller_that_dies_at_start_up_is_reported_and_nothing_is_left():
    require_root()
    topo = SpineLeafTopo(spines=1, leaves=1, hosts_per_leaf=1, bw=20)
    steps = []
    bed = FabricTestbed(topo, apps=("apps.no_such_app",), of_port=OF_PORT, rest_port=REST_PORT,
                        progress=steps.append)
    with pytest.raises(PlatformError, match="ryu-manager exited with"):
        bed.start()
    assert steps and steps[0].startswith("starting ryu-manager")
    assert bed.controller is None and bed.net is None
    assert not controllers_on_port(OF_PORT)
    assert not bridges() & {"spine1", "leaf1"}


def test_a_stopped_testbed_leaves_no_process_bridge_or_link():
    require_root()
    topo = SpineLeafTopo(spines=1, leaves=1, hosts_per_leaf=1, bw=20)
    with FabricTestbed(topo, of_port=OF_PORT, rest_port=REST_PORT):
        assert live_run_pids()
    assert live_run_pids() == []
    assert leftovers() == {"bridges": [], "links": []}
