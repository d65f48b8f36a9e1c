"""Both launch forms work: apps by module name or by file path, alone or together
(ryu-manager loads every real app once; apps/launch_by_path.py)."""

import pytest

from experiments.testbed import FabricTestbed
from mininet_topos.spineleaf import SpineLeafTopo
from tests.harness.testbeds import require_root

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16662, 18089


@pytest.mark.parametrize("apps", [
    ("apps/fabric_controller.py", "apps/multicast_controller.py"),
    ("apps/multicast_controller.py",),
    ("apps/ina_controller.py", "apps.multicast_controller"),
    ("apps.multicast_controller",),
    ("apps/selmcast_controller.py",),
], ids=["paths-together", "path-alone", "path-and-module", "module-alone", "selmcast-path-alone"])
def test_every_launch_form_loads_the_fabric_once_and_the_apps_see_it(apps):
    require_root()
    topo = SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=1, bw=20)
    with FabricTestbed(topo, apps=apps, of_port=OF_PORT, rest_port=REST_PORT) as bed:
        # the testbed PUT the fabric and waited for every switch: the fabric app runs
        tree = bed.client.request("POST", "/multicast/trees", {
            "source": "h1", "receivers": ["h2"], "bandwidth_mbps": 5})
        bed.client.request("DELETE", "/multicast/trees/%d" % tree["id"])
        assert bed.leftovers() == {}
        log = bed.controller_log()
    assert log.count("instantiating app apps.fabric_controller of FabricController") == 1
    assert log.count("of MulticastController") == 1
    assert "Traceback" not in log
