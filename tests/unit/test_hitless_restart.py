"""A restarted controller changes nothing that was right, through the fake datapath: the
switches keep their tables while ryu-manager is killed and started again, and when
they connect to the new one, whose records say the same (table 0's admission flows,
table 1's forwarding, groups and meters of a tree and of jobs, with their return
trees and gradient plans, whose rates the fair policy moved), they get no flow, group
or meter mod at all. A switch with one stale entry gets exactly the message that
mends it, in place."""

import time

import pytest

from syncfabric.openflow import builders as of
from syncfabric.openflow.switch_sync import bands_key, buckets_key, instructions_key
from tests.harness.fake_controller import InProcessController, MemoryStore, description
from tests.harness.fake_openflow import FakeFlow
from tests.harness.in_process import TREE, changes_sent, delivered, listed, post

COLOCATED = {"model_bytes": 4_000_000, "placement": "colocated", "aggregation": False}
STALE = "leaf1"


def contents(table):
    """Everything a fake table holds, instructions, buckets and bands included."""
    return {"flows": sorted((f.table_id, f.priority, f.cookie, sorted(f.match.items()),
                             instructions_key(f.instructions)) for f in table.flows),
            "groups": {i: (kind, buckets_key(b)) for i, (kind, b) in table.groups.items()},
            "meters": {i: (flags, bands_key(b)) for i, (flags, b) in table.meters.items()}}


def jobs_without_leases(controller):
    return [{k: v for k, v in job.items() if k != "expires_in_s"}
            for job in controller.request("GET", "/jobs")[1]["jobs"]]


@pytest.fixture(scope="module")
def before_restart():
    """A controller with a tree and three jobs, each with its return trees and gradient
    plan (the second moved the first down to its fair share), killed: what it saved,
    the tables its switches keep, and what its API listed."""
    first = InProcessController(description())
    try:
        answers = [post(first, "/multicast/trees", dict(TREE, bandwidth_mbps=1, ttl_s=300)),
                   post(first, "/jobs", dict(COLOCATED, workers=["h1", "h3"])),
                   post(first, "/jobs", dict(COLOCATED, workers=["h2", "h4"])),
                   post(first, "/jobs", {"workers": ["h1", "h2", "h3"], "model_bytes": 1_000_000})]
        assert [status for status, _ in answers] == [201] * 4, answers
        moved = first.request("GET", "/jobs/%d" % answers[1][1]["id"])[1]
        assert moved["generation"] > answers[1][1]["generation"]   # the fair policy moved it
        killed = (first.services.store.saved, first.tables(), listed(first),
                  jobs_without_leases(first), answers[0][1])
    finally:
        first.close()
    return killed


def restarted_with(before_restart, tables):
    """A new controller on what the first saved, its switches connecting with `tables`;
    returns it and how many messages it had sent before they connected."""
    saved, *_ = before_restart
    restarted = InProcessController(store=MemoryStore(saved))
    since = len(restarted.network.sent)
    for switch in restarted.view.switches:
        restarted.connect(switch, table=tables[switch])
    restarted.services.jobs.follow(time.monotonic())   # the app's timer: jobs taken back
    restarted.settle()
    return restarted, since


def kept_copies(tables):
    """Copies of the tables (each test stales its own), entries shared as OVS keeps them."""
    copies = {}
    for name, table in tables.items():
        copy = type(table)()
        copy.flows, copy.groups = list(table.flows), dict(table.groups)
        copy.meters = dict(table.meters)
        copies[name] = copy
    return copies


def test_switches_whose_tables_match_the_records_get_no_flow_group_or_meter_mod(before_restart):
    _saved, tables, listed_before, jobs_before, tree = before_restart
    kept = kept_copies(tables)
    held = {name: contents(table) for name, table in kept.items()}
    assert any(f.table_id == of.TABLE_ADMISSION and f.priority != 0 for f in kept[STALE].flows)
    assert all(held[s]["meters"] for s in ("leaf1", "leaf2"))
    restarted, since = restarted_with(before_restart, kept)
    try:
        for switch in restarted.view.switches:
            assert changes_sent(restarted, switch, since) == [], switch
        topology = restarted.request("GET", "/fabric/topology")[1]
        assert all(s["synced"] for s in topology["switches"])
        assert {name: contents(table) for name, table in restarted.tables().items()} == held
        assert jobs_without_leases(restarted) == jobs_before
        after = listed(restarted)
        assert after["plans"] == listed_before["plans"]
        assert [t["id"] for t in after["trees"]] == [t["id"] for t in listed_before["trees"]]
        assert delivered(restarted, tree) == {"h2", "h3", "h4"}
    finally:
        restarted.close()


def drop_admission(table):
    """Table 0 loses one of a job's admission flows (a member's datagrams to a shard)."""
    flow = next(f for f in table.flows if f.table_id == of.TABLE_ADMISSION and f.instructions
                and f.priority != 0 and "ipv4_src" in f.match)
    table.flows.remove(flow)


def blank_forwarding(table):
    """Table 1's flow of a plan's or job's stream forwards nowhere."""
    flow = next(f for f in table.flows if f.table_id == of.TABLE_FORWARDING
                and "udp_dst" in f.match)
    table.flows[table.flows.index(flow)] = flow._replace(instructions=[])


def add_stranger(table):
    """A flow of ours (a job's cookie) that no record wants."""
    cookie = next(f.cookie for f in table.flows if "udp_dst" in f.match)
    table.flows.append(FakeFlow(350, cookie, {"eth_type": of.ETH_TYPE_IPV4, "ip_proto": 17,
                                              "ipv4_dst": "10.9.9.9", "udp_dst": 9},
                                [], of.TABLE_FORWARDING))


def double_a_meter(table):
    meter_id = min(table.meters)
    flags, (band,) = table.meters[meter_id]
    table.meters[meter_id] = (flags, [type(band)(rate=band.rate * 2, burst_size=band.burst_size)])


def empty_a_group(table):
    group_id = min(table.groups)
    kind, _buckets = table.groups[group_id]
    table.groups[group_id] = (kind, [])


@pytest.mark.parametrize("stale, mend", [
    (drop_admission, ("OFPFlowMod", "OFPFC_ADD", of.TABLE_ADMISSION)),
    (blank_forwarding, ("OFPFlowMod", "OFPFC_ADD", of.TABLE_FORWARDING)),
    (add_stranger, ("OFPFlowMod", "OFPFC_DELETE_STRICT", of.TABLE_FORWARDING)),
    (double_a_meter, ("OFPMeterMod", "OFPMC_MODIFY", None)),
    (empty_a_group, ("OFPGroupMod", "OFPGC_MODIFY", None)),
], ids=lambda value: getattr(value, "__name__", None))
def test_a_switch_with_one_stale_entry_gets_exactly_its_mend(before_restart, stale, mend):
    _saved, tables, *_ = before_restart
    kept = kept_copies(tables)
    held = {name: contents(table) for name, table in kept.items()}
    stale(kept[STALE])
    assert contents(kept[STALE]) != held[STALE]
    restarted, since = restarted_with(before_restart, kept)
    try:
        sent = changes_sent(restarted, STALE, since)
        kind, command, table_id = mend
        ofproto = restarted.switches[STALE].ofproto
        assert [(type(m).__name__, m.command, getattr(m, "table_id", None)) for m in sent] == [
            (kind, getattr(ofproto, command), table_id)]
        for switch in set(restarted.view.switches) - {STALE}:
            assert changes_sent(restarted, switch, since) == [], switch
        assert {name: contents(table) for name, table in restarted.tables().items()} == held
    finally:
        restarted.close()


def test_a_switch_that_lost_its_tables_gets_forwarding_before_admission(before_restart):
    """Table 0's admission flows send a member's datagrams to table 1: added first, they
    would admit datagrams that table 1 cannot forward yet."""
    _saved, tables, *_ = before_restart
    kept = kept_copies(tables)
    held = contents(kept[STALE])
    kept[STALE] = type(kept[STALE])()   # restarted meanwhile: empty
    restarted, since = restarted_with(before_restart, kept)
    try:
        flow_tables = [m.table_id for m in changes_sent(restarted, STALE, since)
                       if type(m).__name__ == "OFPFlowMod"]
        assert set(flow_tables) == {of.TABLE_ADMISSION, of.TABLE_FORWARDING}
        assert flow_tables == sorted(flow_tables, reverse=True)
        assert contents(restarted.tables()[STALE]) == held
    finally:
        restarted.close()
