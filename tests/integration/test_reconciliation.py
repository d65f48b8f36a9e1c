"""Switch reconnects and controller restarts (ryu-manager + OVS + Mininet, 2x2 spine-leaf):
a switch ends up holding exactly what the controller reports, nothing more, and a
restarted controller carries on with the trees, plans and rounds it had."""


import pytest

from experiments.ovs import ofctl
from experiments.switch_oracle import switch_state
from experiments.controller_process import wait_until
from mininet_topos.spineleaf import SpineLeafTopo
from syncfabric.hosts.transport.controller_client import ControllerClient, ControllerHttpError
from tests.harness.testbeds import running_testbed

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16663, 18090


@pytest.fixture(scope="module")
def bed():
    yield from running_testbed(SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, bw=20,
                                             aggregators="spines", aggregator_bw=9),
                               OF_PORT, REST_PORT)


def synced(bed):
    return all(s["synced"] for s in bed.client.get("/fabric/topology")["switches"])


def reconciliations(bed, switch):
    """The controller's reconciliation lines for `switch`, oldest first."""
    return [line for line in bed.controller_log().splitlines()
            if line.startswith(switch + " (dpid") and "changes sent" in line]


def adds_or_modifies(line):
    """Whether a reconciliation line says something was added or modified: a switch that
    kept its tables needs neither (deletes: state moved away while it was gone)."""
    return " add " in line or " modify " in line


def reconnect(bed, switch, restart=False):
    """Reconnect the switch; the log line of its reconciliation."""
    before = len(reconciliations(bed, switch))
    bed.reconnect_switch(switch, restart=restart)
    wait_until(lambda: len(reconciliations(bed, switch)) > before and synced(bed), 10,
               "the switch to come back")
    return reconciliations(bed, switch)[-1]


def test_a_reconnecting_switch_loses_what_we_do_not_know(bed):
    ofctl("add-meter", "leaf1", "meter=4242,kbps,band=type=drop,rate=1000")
    ofctl("add-group", "leaf1", "group_id=4242,type=all,bucket=output:1")
    ofctl("add-flow", "leaf1", "cookie=0x5346000200000999,priority=400,ip,nw_dst=239.9.9.9,"
                               "actions=group:4242")
    assert any(switch_state("leaf1"))
    reconnect(bed, "leaf1")
    assert not any(switch_state("leaf1"))
    assert bed.leftovers() == {}
    ping = bed.host("h1").cmd("ping -c 1 -W 2 %s" % bed.host("h4").IP())
    assert " 0% packet loss" in ping   # the fabric flows are back


def test_a_switch_that_kept_its_tables_reconnects_untouched(bed):
    tree = bed.client.request("POST", "/multicast/trees", {
        "source": "h1", "receivers": ["h2", "h3", "h4"], "bandwidth_mbps": 5})
    plan = bed.client.request("POST", "/ina/plans", {
        "job": "j", "workers": ["h1", "h2", "h3"], "ps": "h4", "gradient_mb": 1})
    held = {switch: switch_state(switch) for switch in bed.topo.switches()}
    for switch in ("leaf1", "leaf2"):   # nothing can move around a leaf: untouched
        line = reconnect(bed, switch)
        assert line.endswith("; 0 changes sent"), line   # OVS reads back what we wrote
    assert {switch: switch_state(switch) for switch in bed.topo.switches()} == held
    for switch in ("spine1", "spine2"):   # the plan moved off it meanwhile
        line = reconnect(bed, switch)
        assert not adds_or_modifies(line), line
    bed.client.request("DELETE", "/multicast/trees/%d" % tree["id"])
    bed.client.request("DELETE", "/ina/plans/%d" % plan["id"])
    assert bed.leftovers() == {}


def test_a_killed_controller_leaves_nothing_once_started_again(bed):
    bed.client.request("POST", "/multicast/trees", {
        "source": "h1", "receivers": ["h2", "h3", "h4"], "bandwidth_mbps": 5})
    bed.client.request("POST", "/ina/plans", {
        "job": "j", "workers": ["h1", "h2", "h3"], "ps": "h4", "gradient_mb": 1})
    assert bed.leftovers()
    bed.restart_controller(forget=True)   # no state directory left: it knows nothing
    assert bed.client.get("/multicast/trees") == {"trees": []}
    assert bed.leftovers() == {}


def test_a_restarted_controller_restores_trees_plans_and_rounds(bed):
    tree = bed.client.request("POST", "/multicast/trees", {
        "source": "h1", "receivers": ["h2", "h3", "h4"], "bandwidth_mbps": 5, "ttl_s": 600})
    plan = bed.client.request("POST", "/ina/plans", {
        "job": "j", "workers": ["h1", "h2", "h3"], "ps": "h4", "gradient_mb": 1})
    round_ = bed.client.request("POST", "/selmcast/rounds", {
        "job": "r", "workers": ["h1", "h2", "h3"], "update_mb": 0.2, "p": 1})
    live = {switch: switch_state(switch) for switch in bed.topo.switches()}
    bed.client.request("POST", "/multicast/trees", {
        "source": "h2", "receivers": ["h3"], "bandwidth_mbps": 1, "ttl_s": 2})
    before = {switch: len(reconciliations(bed, switch)) for switch in bed.topo.switches()}
    bed.restart_controller(away_s=2.5)   # the short lease runs out meanwhile
    wait_until(lambda: {t["id"] for t in bed.client.get("/multicast/trees")["trees"]}
               == {tree["id"]} | {t["id"] for t in round_["trees"]}, 5, "the expired tree to go")
    restored = bed.client.get("/multicast/trees/%d" % tree["id"])
    assert {k: restored[k] for k in ("address", "edges", "bandwidth_mbps")} == {
        k: tree[k] for k in ("address", "edges", "bandwidth_mbps")}
    assert 590 < restored["reservation"]["expires_in_s"] < 600
    assert bed.client.get("/ina/plans/%d" % plan["id"]) == {
        k: v for k, v in plan.items() if k != "release_key"}
    assert bed.client.get("/selmcast/rounds/%d" % round_["id"]) == {
        k: v for k, v in round_.items() if k != "release_key"}
    assert {switch: switch_state(switch) for switch in bed.topo.switches()} == live
    for switch in bed.topo.switches():   # tables intact: nothing re-sent (the lapsed tree: deleted)
        (line,) = reconciliations(bed, switch)[before[switch]:]
        assert not adds_or_modifies(line), line
    log = bed.controller_log()
    assert "fabric restored" in log and "tree %d restored" % tree["id"] in log
    assert "plan %d (job 'j') restored" % plan["id"] in log
    assert "round %d of job 'r' restored" % round_["id"] in log
    assert "Traceback" not in log
    stranger = ControllerClient(bed.client.base_url, token=bed.token)
    for path in ("/multicast/trees/%d" % tree["id"], "/ina/plans/%d" % plan["id"],
                 "/selmcast/rounds/%d" % round_["id"]):
        with pytest.raises(ControllerHttpError) as refused:
            stranger.request("DELETE", path)
        assert refused.value.status == 403   # the release keys survived the restart too
        bed.client.request("DELETE", path)
    assert bed.leftovers() == {}
    ping = bed.host("h1").cmd("ping -c 1 -W 2 %s" % bed.host("h4").IP())
    assert " 0% packet loss" in ping
