"""The multicast trees service in-process on fake switches: admission, rollback when a
switch refuses or is silent, races with deletes, failover and make-before-break moves."""

import time

import pytest
from ryu.lib import hub

from syncfabric.openflow import builders as of
from syncfabric.openflow.tree_messages import tree_match
from syncfabric.openflow.installer import DRAIN_S
from tests.harness.fake_controller import InProcessController, description
from tests.harness.in_process import (NOTHING_LISTED, TREE, changes_sent, delivered, empty, listed,
                                      move_make_before_break, post, release_key)


def test_hosts_behind_a_disconnected_switch_get_409_and_nothing_is_booked(controller):
    controller.disconnect("leaf2")
    code, answer = post(controller, "/multicast/trees", TREE)
    assert code == 409 and "no tree" in answer["error"], answer
    code, answer = post(controller, "/ina/plans", {"job": "j", "workers": ["h1", "h2"],
                                                   "ps": "h3", "gradient_mb": 1})
    assert code in (409, 503), answer
    assert listed(controller) == NOTHING_LISTED
    assert dict(controller.services.fabric.book.reserved_mbps) == {}


def test_reservations_add_up_and_the_conflict_names_what_is_left(controller):
    code, first = post(controller, "/multicast/trees", dict(TREE, receivers=["h3"], bandwidth_mbps=12))
    code, answer = post(controller, "/multicast/trees", dict(TREE, receivers=["h4"], bandwidth_mbps=12))
    assert code == 409 and answer["max_feasible_mbps"] == pytest.approx(8.0)   # h1's own link
    code, second = post(controller, "/multicast/trees", dict(TREE, receivers=["h4"], bandwidth_mbps=8))
    assert code == 201
    for tree in (first, second):
        controller.request("DELETE", "/multicast/trees/%d" % tree["id"], headers=release_key(tree))
    assert empty(controller)


def test_a_switch_rejecting_the_tree_rolls_everything_back(controller):
    controller.switches["leaf2"].reject = lambda message: type(message).__name__ == "OFPGroupMod"
    code, answer = post(controller, "/multicast/trees", TREE)
    assert code == 500 and "nothing was installed" in answer["error"]
    assert "switch error" in answer["error"]
    assert listed(controller) == NOTHING_LISTED and empty(controller)
    controller.switches["leaf2"].reject = lambda message: False
    code, again = post(controller, "/multicast/trees", dict(TREE, bandwidth_mbps=20))
    assert code == 201   # all bandwidth came back


def test_a_switch_that_never_confirms_rolls_back_after_the_timeout(controller):
    controller.switches["spine1"].silent = controller.switches["spine2"].silent = True
    code, answer = post(controller, "/multicast/trees", TREE)
    assert code == 500 and "no confirmation within" in answer["error"]
    assert listed(controller) == NOTHING_LISTED
    assert dict(controller.services.fabric.book.reserved_mbps) == {}


def test_a_switch_disconnecting_fails_the_installation_at_once(controller):
    """ryu.app.ofctl.service's _handle_dead: no waiting for the timeout."""
    controller.services.installer.timeout_s = 30.0
    controller.switches["leaf2"].silent = True
    started = time.monotonic()
    hub.spawn_after(0.05, controller.disconnect, "leaf2")
    code, answer = post(controller, "/multicast/trees", TREE)
    assert code == 500 and "disconnected" in answer["error"], answer
    assert time.monotonic() - started < 2.0
    assert listed(controller) == NOTHING_LISTED
    assert dict(controller.services.fabric.book.reserved_mbps) == {}


def test_a_delete_during_installation_leaves_nothing_and_the_post_says_so(controller):
    deletes = []

    def delete_while_installing(datapath, message):
        trees = controller.services.trees
        if not deletes and type(message).__name__ == "OFPBarrierReply" and trees.book.ids():
            (tree_id,) = trees.book.ids()
            deletes.append(hub.spawn(trees.release, tree_id, time.monotonic()))
    controller.network.before_answer = delete_while_installing
    code, answer = post(controller, "/multicast/trees", TREE)
    assert code == 409 and "released while being installed" in answer["error"]
    assert deletes[0].wait()["id"] == 1
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def test_a_tree_deleted_while_it_gets_a_backup_again_leaves_nothing(controller):
    _, tree = post(controller, "/multicast/trees", TREE)
    ((_, spine, _),) = tree["backup_uplinks"]
    controller.port_down("leaf1", spine)   # moved to the other spine: no backup left
    deletes = []

    def delete_while_moving(datapath, message):
        trees = controller.services.trees
        if not deletes and type(message).__name__ == "OFPBarrierReply":
            deletes.append(hub.spawn(trees.release, tree["id"], time.monotonic()))
    controller.network.before_answer = delete_while_moving
    controller.port_down("leaf1", spine, down=False)   # back: a backup again, as it is deleted
    assert deletes and deletes[0].wait()["id"] == tree["id"]
    controller.settle()
    assert listed(controller) == NOTHING_LISTED and empty(controller)


def test_a_tree_s_ingress_fails_over_by_itself_then_the_tree_moves_off_the_backup(controller):
    _, tree = post(controller, "/multicast/trees", TREE)
    ((leaf, spine, backup),) = tree["backup_uplinks"]
    assert leaf == "leaf1" and {spine, backup} == {"spine1", "spine2"}
    assert ["leaf1", backup] not in tree["edges"]
    assert controller.state()[backup]["groups"] == [tree["id"]]   # its share waits there
    controller.link_down("leaf1", spine)   # before the controller hears of it
    assert delivered(controller, tree) == {"h2", "h3", "h4"}
    controller.port_down("leaf1", spine)
    _, now = controller.request("GET", "/multicast/trees/%d" % tree["id"])
    assert ["leaf1", backup] in now["edges"] and now["backup_uplinks"] == []   # no third spine
    assert delivered(controller, now) == {"h2", "h3", "h4"}
    state = controller.state()
    assert state["leaf1"]["groups"] == [tree["id"]] and state[spine]["groups"] == []
    controller.port_down("leaf1", spine, down=False)   # back: the tree stays, with a backup
    _, now = controller.request("GET", "/multicast/trees/%d" % tree["id"])
    assert ["leaf1", backup] in now["edges"] and now["backup_uplinks"] == [["leaf1", backup, spine]]
    assert controller.state()[spine]["groups"] == [tree["id"]]
    controller.link_down("leaf1", backup)
    assert delivered(controller, now) == {"h2", "h3", "h4"}


def test_a_failed_link_moves_the_tree_make_before_break(monkeypatch):
    monkeypatch.setenv("SYNCFABRIC_LOCAL_REPAIR", "0")   # the move alone
    controller = InProcessController(description())
    try:
        move_make_before_break(controller)
    finally:
        controller.close()


def test_a_move_s_break_waits_for_packets_on_the_old_path_and_counts_as_pending(controller):
    installer, datapath = controller.services.installer, controller.switches["leaf1"]
    removal = of.flow_removal(datapath, of.multicast_cookie(99), of.PRIORITY_MULTICAST,
                              tree_match(1, "239.9.9.9"))
    sent_before, started = len(controller.network.sent), time.monotonic()

    def removal_sent():   # the audits' stats requests may go meanwhile
        return any(message is removal for _, message in controller.network.sent[sent_before:])
    waiting = hub.spawn(installer.send_after_drain, {datapath: [removal]})
    hub.sleep(0.05)
    assert installer.pending() == 1 and not removal_sent()
    waiting.wait()
    assert time.monotonic() - started >= DRAIN_S
    assert removal_sent()
    controller.settle()
    assert installer.pending() == 0


def test_a_switch_back_with_its_tables_is_read_before_a_tree_s_backups_reach_it(controller):
    """Backup uplinks chosen again while a switch that kept its tables was still being
    read sent it a group add that met the group it kept (GROUP_EXISTS), and the whole
    tree was released: seen once in test_reconciliation on 2x2."""
    _, tree = post(controller, "/multicast/trees", TREE)
    spine = next(child for parent, child in tree["edges"] if parent == "leaf1")
    controller.disconnect(spine)   # the tree moves to the other spine, its backups gone
    controller.connect(spine, keep_table=True, settle=False)
    controller.poll_links(settle=False)   # the links come back before the switch is read
    controller.settle()
    assert [t["id"] for t in listed(controller)["trees"]] == [tree["id"]]
    assert delivered(controller, tree) == set(TREE["receivers"])
    backups = listed(controller)["trees"][0]["backup_uplinks"]
    assert backups and all(spine in uplink for uplink in backups), backups   # once it synced


def test_a_tree_that_fits_nowhere_after_a_failure_is_released(controller):
    post(controller, "/multicast/trees", dict(TREE, receivers=["h3"]))
    controller.port_down("leaf1", "spine1")
    controller.port_down("leaf1", "spine2")
    assert listed(controller)["trees"] == [] and empty(controller)


def test_a_tree_is_policed_once_at_its_ingress_switch_through_a_reroute(controller):
    _, tree = post(controller, "/multicast/trees", TREE)

    def metered():
        return {s: state["meters"] for s, state in controller.state().items() if state["meters"]}
    assert metered() == {"leaf1": [tree["id"]]}   # h1's switch; none downstream
    _flags, (band,) = controller.switches["leaf1"].table.meters[tree["id"]]
    assert band.rate == 5000
    spine = next(b for a, b in tree["edges"] if a == "leaf1")
    controller.port_down("leaf1", spine)
    moved = controller.request("GET", "/multicast/trees/%d" % tree["id"])[1]
    assert spine not in {b for a, b in moved["edges"] if a == "leaf1"}
    assert metered() == {"leaf1": [tree["id"]]} and delivered(controller, moved) == {"h2", "h3", "h4"}
    status, _ = controller.request("DELETE", "/multicast/trees/%d" % tree["id"],
                                   headers=release_key(tree))
    assert status == 200 and empty(controller)


def test_a_switch_that_connects_while_its_tree_moves_keeps_nothing_stale(controller, monkeypatch):
    """A switch read and reconciled while a tree moves off it must not keep the tree's old
    share there: it is reconciled against the moved tree (emulated reconnects once left
    a group that the next backup change ran into)."""
    _, tree = post(controller, "/multicast/trees", TREE)
    spine = next(b for a, b in tree["edges"] if a == "leaf1" and b.startswith("spine"))
    installer, install = controller.services.installer, controller.services.installer.install

    def spine_back_meanwhile(messages):   # the move's install: the spine returns during it
        monkeypatch.setattr(installer, "install", install)
        controller.connect(spine, keep_table=True, settle=False)
        hub.sleep(0.3)   # the spine is read and reconciled while the move is unconfirmed
        return install(messages)
    monkeypatch.setattr(installer, "install", spine_back_meanwhile)
    controller.disconnect(spine)
    controller.settle()
    assert installer.install is install   # the move ran, with the spine coming back during it
    since = len(controller.network.sent)
    controller.connect(spine, keep_table=True)
    assert changes_sent(controller, spine, since) == []
