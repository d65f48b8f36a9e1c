"""The switch-state oracle (experiments/switch_oracle.py) on canned switch dumps: it reads what
ovs-ofctl prints, and it reports every kind of inconsistency it claims to catch."""

import re

import pytest

from experiments import switch_oracle
from syncfabric.decisions.multicast_trees import compute_tree, with_backup_uplinks
from syncfabric.decisions.reservations import ReservationBook
from syncfabric.openflow import builders as of
from tests.harness.fabrics import spine_leaf_view

DUMPS = {
    "dump-groups": ["group_id=1,type=all,bucket=actions=group:1073742080,bucket=actions=output:4",
                    "group_id=1073742080,type=ff,bucket=watch_port:1,actions=output:1,"
                    "bucket=watch_port:2,actions=output:2"],
    "dump-meters": ["meter=1 kbps burst bands=", "type=drop rate=5000 burst_size=500",
                    "meter=%d kbps burst bands=" % (of.STEERING_METER_BASE + 4096),
                    "type=drop rate=2000 burst_size=200"],
    of.MULTICAST_COOKIE_BASE: ["cookie=0x5346000200000001, priority=400,ip,in_port=3,"
                               "nw_dst=239.1.0.1 actions=meter:1,group:1"],
    of.STEERING_COOKIE_BASE: ["cookie=0x5346000300000001, priority=350,udp,nw_src=10.0.0.1,"
                              "nw_dst=10.0.0.4,tp_dst=20008 actions=meter:1052672,output:2"],
}


def fake_ofctl_lines(command, *args):
    if command == "dump-flows":
        assert args[-1].startswith("table=1,"), "steering and trees forward in table 1"
        cookie = int(re.search(r"cookie=(0x[0-9a-f]+)", args[-1]).group(1), 16)
        return DUMPS[cookie]
    return DUMPS[command]


def test_switch_state_reads_groups_meters_and_multicast_and_steering_flows(monkeypatch):
    monkeypatch.setattr(switch_oracle, "ofctl_lines", fake_ofctl_lines)
    assert switch_oracle.switch_state("leaf1") == (
        {1: ("all", [(None, "group:1073742080"), (None, "output:4")]),
         1073742080: ("ff", [(1, "output:1"), (2, "output:2")])},
        {1: 5000}, {(1, 3, "239.1.0.1")}, {(1, "10.0.0.1", "10.0.0.4", 20008, 2)}, [2000])


class FakeBed:
    def __init__(self, trees, plans=()):
        self.client = self
        self.items = {"/multicast/trees": {"trees": trees}, "/ina/plans": {"plans": list(plans)},
                      "/selmcast/rounds": {"rounds": []}}

    def get(self, path):
        return self.items[path]


@pytest.fixture
def live():
    """A view, two tree reports (with backup uplinks) as GET /multicast/trees gives
    them, and the switch state they call for."""
    view = spine_leaf_view(2, 2, 2, bw=20)
    book = ReservationBook(view)
    trees = [book.record(book.reserve(with_backup_uplinks(view, compute_tree(
        view, "h1", receivers, 8.0, book.reserved_mbps))).tree_id, 0.0)
             for receivers in (["h2", "h3"], ["h4"])]
    assert all(tree["backup_uplinks"] for tree in trees)
    return view, trees, switch_oracle.expected_state(view, trees, [])


def test_switches_holding_exactly_the_live_trees_pass(monkeypatch, live):
    view, trees, expected = live
    monkeypatch.setattr(switch_oracle, "switch_state", lambda switch: expected[switch])
    assert switch_oracle.problems(FakeBed(trees), view, None)[0] == []
    assert expected["leaf1"][1] == {trees[0]["id"]: 8000, trees[1]["id"]: 8000}   # the ingress
    assert len(expected["leaf1"][0]) == 4   # each tree's ALL group and FAST_FAILOVER group


def test_an_extra_group_a_missing_meter_or_a_wrong_bucket_is_found(monkeypatch, live):
    view, trees, expected = live
    extra = {99: ("all", [(None, "output:1")])}
    wrong = {k: ("ff", [(7, "output:7")]) for k in expected["leaf1"][0]}
    for switch, broken in [("spine1", ({**expected["spine1"][0], **extra}, *expected["spine1"][1:])),
                           ("leaf1", (expected["leaf1"][0], {}, expected["leaf1"][2])),
                           ("leaf1", (wrong, *expected["leaf1"][1:]))]:
        held = dict(expected, **{switch: broken})
        monkeypatch.setattr(switch_oracle, "switch_state", lambda s: held[s])
        found = switch_oracle.problems(FakeBed(trees), view, None)[0]
        assert len(found) == 1 and found[0].startswith(switch)


def test_overbooking_and_a_tree_on_the_link_that_is_down_are_found(monkeypatch, live):
    view, trees, _ = live
    overbooked = trees + [dict(trees[0], id=9, bandwidth_mbps=15.0)]
    monkeypatch.setattr(switch_oracle, "switch_state",
                        lambda s: switch_oracle.expected_state(view, overbooked, [])[s])
    found = switch_oracle.problems(FakeBed(overbooked), view, None)[0]
    assert found and all(" booked " in problem for problem in found)
    assert "h1->leaf1 booked 31.000 of 20.000 Mbit/s" in found   # 8 + 8 + 15
    tail, head = next(edge for edge in trees[0]["edges"] if not edge[0].startswith("h"))
    monkeypatch.setattr(switch_oracle, "switch_state",
                        lambda s: switch_oracle.expected_state(view, trees[:1], [])[s])
    found = switch_oracle.problems(FakeBed(trees[:1]), view, (tail, head))[0]
    assert found == ["tree %d crosses the link that is down, %s-%s" % (trees[0]["id"], tail, head)]
    _, _, backup = trees[0]["backup_uplinks"][0]
    found = switch_oracle.problems(FakeBed(trees[:1]), view, ("leaf1", backup))[0]
    assert found == ["tree %d's backup uplink crosses the link that is down" % trees[0]["id"]]


PLAN = {"id": 1, "revision": 0, "ports": {"h4": 20008}, "aggregates": [],
        "workers": {"h1": [{"node": "h4", "ps": "h4", "rate_mbps": 2.0,
                            "path": ["h1", "leaf1", "spine1", "leaf2", "h4"]}]}}


def test_a_plan_calls_for_its_steering_flows_and_first_hop_meter_and_a_missing_one_is_found(
        monkeypatch, live):
    view, trees, _ = live
    expected = switch_oracle.expected_state(view, trees, [PLAN])
    key = (1, view.ip("h1"), view.ip("h4"), 20008)
    assert expected["leaf1"][3] == {key + (view.out_port("leaf1", "spine1"),)}
    assert expected["spine1"][3] == {key + (view.out_port("spine1", "leaf2"),)}
    assert expected["leaf1"][4] == [2000] and expected["spine1"][4] == []
    monkeypatch.setattr(switch_oracle, "switch_state", lambda s: expected[s])
    assert switch_oracle.problems(FakeBed(trees, [PLAN]), view, None)[0] == []
    held = dict(expected, spine1=expected["spine1"][:3] + (set(), []))
    monkeypatch.setattr(switch_oracle, "switch_state", lambda s: held[s])
    (found,) = switch_oracle.problems(FakeBed(trees, [PLAN]), view, ("spine1", "leaf2"))[0][-1:]
    assert found.startswith("spine1 steering flows")
    assert "plan 1 crosses the link that is down, spine1-leaf2" in switch_oracle.problems(
        FakeBed(trees, [PLAN]), view, ("spine1", "leaf2"))[0]
