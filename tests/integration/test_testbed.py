"""FabricTestbed tears down whatever it started: when start-up fails, and when it stops."""

import signal
import subprocess
import sys

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
    assert not bed.controller.running() and bed.net is None
    assert not controllers_on_port(OF_PORT)
    assert not bridges() & {"spine1", "leaf1"}


def test_a_stopped_testbed_leaves_no_process_bridge_or_link():
    require_root()
    topo = SpineLeafTopo(spines=1, leaves=1, hosts_per_leaf=1, bw=20)
    with FabricTestbed(topo, of_port=OF_PORT, rest_port=REST_PORT):
        assert live_run_pids()
    assert live_run_pids() == []
    assert leftovers() == {"bridges": [], "links": []}


def test_a_run_ended_by_sigterm_tears_down_its_fabric_and_controller():
    require_root()
    script = ("import time; from experiments.testbed import FabricTestbed; "
              "from mininet_topos.spineleaf import SpineLeafTopo\n"
              "with FabricTestbed(SpineLeafTopo(spines=1, leaves=1, hosts_per_leaf=1, bw=20), "
              "of_port=%d, rest_port=%d):\n    print('up', flush=True); time.sleep(120)"
              % (OF_PORT, REST_PORT))
    # what `timeout` does to an experiment: SIGTERM once the fabric is up
    run = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert run.stdout.readline() == "up\n"
    assert controllers_on_port(OF_PORT) and bridges() >= {"spine1", "leaf1"}
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=60) == 128 + signal.SIGTERM
    assert not controllers_on_port(OF_PORT) and live_run_pids() == []
    assert leftovers() == {"bridges": [], "links": []}
