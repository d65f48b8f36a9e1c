"""Who may change what (apps/rest_json.py), for real: ryu-manager + OVS + Mininet (2x2)."""

import socket
import subprocess
import time

import pytest

from experiments.controller_client import ControllerClient, ControllerHttpError
from experiments.testbed import ryu_manager_command, wait_until
from mininet_topos.spineleaf import SpineLeafTopo
from tests.conftest import require_root, running_testbed

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16664, 18091
TREE = {"source": "h1", "receivers": ["h2", "h3"], "bandwidth_mbps": 2}
PLAN = {"job": "j", "workers": ["h1", "h2"], "ps": "h4", "gradient_mb": 1}


@pytest.fixture(scope="module")
def bed():
    yield from running_testbed(SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, bw=20,
                                             aggregators="spines", aggregator_bw=9),
                               OF_PORT, REST_PORT)


def status_of(call):
    try:
        call()
        return 200
    except ControllerHttpError as error:
        return error.status


@pytest.mark.parametrize("token", [None, "wrong"])
def test_state_changes_need_the_token_and_gets_do_not(bed, token):
    stranger = ControllerClient(bed.client.base_url, token=token or "")
    for method, path, body in [("POST", "/multicast/trees", TREE), ("POST", "/ina/plans", PLAN),
                               ("PUT", "/fabric/topology", {}), ("DELETE", "/multicast/trees/1", None)]:
        with pytest.raises(ControllerHttpError) as error:
            stranger.request(method, path, body)
        assert error.value.status == 401 and "Authorization: Bearer" in error.value.body["error"]
    assert stranger.get("/multicast/trees") == {"trees": []}
    assert stranger.get("/fabric/topology")["switches"]
    assert bed.leftovers() == {}


@pytest.mark.parametrize("path, body", [("/multicast/trees", TREE), ("/ina/plans", PLAN),
                                        ("/selmcast/rounds", {"job": "s", "workers": ["h1", "h2", "h3"],
                                                              "update_mb": 1, "p": 1})])
def test_a_client_releases_only_what_it_created(bed, path, body):
    created = bed.client.request("POST", path, body)
    assert created["release_key"] == bed.client.release_key
    other = ControllerClient(bed.client.base_url, token=bed.token)   # same token, other key
    item = "%s/%d" % (path, created["id"])
    assert status_of(lambda: other.request("DELETE", item)) == 403
    assert bed.client.get(item)["id"] == created["id"]   # still there
    bed.client.request("DELETE", item)
    assert bed.leftovers() == {}


def test_trees_of_a_selmcast_round_are_released_with_the_round_only(bed):
    created = bed.client.request("POST", "/selmcast/rounds", {
        "job": "s", "workers": ["h1", "h2", "h3"], "update_mb": 1, "p": 1})
    tree = created["trees"][0]["id"]
    assert status_of(lambda: bed.client.request("DELETE", "/multicast/trees/%d" % tree)) == 403
    bed.client.request("DELETE", "/selmcast/rounds/%d" % created["id"])
    assert bed.client.get("/multicast/trees") == {"trees": []}


def test_without_wsapi_host_the_api_answers_on_loopback_only():
    require_root()
    port = REST_PORT + 100
    process = subprocess.Popen([ryu_manager_command(), "--wsapi-port", str(port),
                                "--ofp-tcp-listen-port", str(OF_PORT + 100), "apps.fabric_controller"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def answers():
            try:
                return ControllerClient("http://127.0.0.1:%d" % port).get("/fabric/topology")
            except OSError:
                return False
        wait_until(answers, 20, "the REST API")
        listening = subprocess.run(["ss", "-ltnH", "sport = :%d" % port], capture_output=True,
                                   text=True, check=True).stdout.split()
        assert "127.0.0.1:%d" % port in listening and "0.0.0.0:%d" % port not in listening
        outside = socket.gethostbyname(socket.gethostname())
        if not outside.startswith("127."):
            with pytest.raises(OSError):
                socket.create_connection((outside, port), timeout=2).close()
    finally:
        process.terminate()
        process.wait(timeout=10)
        time.sleep(0.2)
