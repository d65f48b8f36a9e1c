"""What every switch must hold, and what it does: the groups, meters and flows that the
live trees and plans call for (from their REST reports and the decisions that made
them), read back with ovs-ofctl and compared, plus the checks that nothing is
overbooked or crosses a link that is down. The soak runs it after every step; fault
recovery and the integration tests use it to find what a run left behind."""

import re
import time
from collections import defaultdict

from experiments.ovs import ofctl_lines
from syncfabric.decisions.multicast_trees import MulticastTree, backup_links, switch_shares
from syncfabric.openflow.builders import (APP_COOKIE_MASK, MULTICAST_COOKIE_BASE,
                                          STEERING_COOKIE_BASE, STEERING_METER_BASE,
                                          meter_rate_kbps)
from syncfabric.openflow.tree_messages import failover_group_id


def field(pattern, line, base=None):
    """The first group of `pattern` in a dump line (an int in `base` if given), or None:
    a flow we did not install may lack a field ours have, and must show, not crash."""
    found = re.search(pattern, line)
    if found is None:
        return None
    return found.group(1) if base is None else int(found.group(1), base)


def switch_state(switch):
    """What a switch holds of ours: ({group: (type, buckets)}, {tree meter: kbps},
    {(tree, in_port, address)}, {(plan, src ip, dst ip, UDP port, out port)}, [steering
    meter kbps, sorted]), read with ovs-ofctl; see group_state for buckets."""
    groups = {}
    for line in ofctl_lines("dump-groups", switch):
        found = re.match(r"group_id=(\d+),type=(\w+)", line)
        if found:
            buckets = [(int(watch) if watch else None, action) for watch, action in re.findall(
                r"bucket=(?:watch_port:(\d+),)?actions=((?:output|group):\d+)", line)]
            groups[int(found.group(1))] = group_state(found.group(2), buckets)
    meters, meter = {}, None
    for line in ofctl_lines("dump-meters", switch):
        if line.startswith("meter="):
            meter = int(line.split()[0].split("=")[1])
            meters[meter] = None
        elif meter is not None and "rate=" in line:
            meters[meter] = int(re.search(r"rate=(\d+)", line).group(1))
    flows = set()
    for line in ofctl_lines("dump-flows", "--no-stats", switch,
                            "table=1,cookie=%#x/%#x" % (MULTICAST_COOKIE_BASE, APP_COOKIE_MASK)):
        flows.add((field(r"cookie=(0x[0-9a-f]+)", line, 16) & ~APP_COOKIE_MASK,
                   field(r"in_port=(\d+)", line, 10), field(r"nw_dst=([\d.]+)", line)))
    steering = set()
    for line in ofctl_lines("dump-flows", "--no-stats", switch,
                            "table=1,cookie=%#x/%#x" % (STEERING_COOKIE_BASE, APP_COOKIE_MASK)):
        steering.add((field(r"cookie=(0x[0-9a-f]+)", line, 16) & ~APP_COOKIE_MASK,
                      field(r"nw_src=([\d.]+)", line), field(r"nw_dst=([\d.]+)", line),
                      field(r"tp_dst=(\d+)", line, 10), field(r"output:(\d+)", line, 10)))
    stream_meters = sorted(rate for meter, rate in meters.items() if meter >= STEERING_METER_BASE)
    tree_meters = {meter: rate for meter, rate in meters.items() if meter < STEERING_METER_BASE}
    return groups, tree_meters, flows, steering, stream_meters


def tree_of(report):
    """The MulticastTree of a tree's report."""
    return MulticastTree(report["source"], tuple(report["receivers"]),
                         tuple(tuple(edge) for edge in report["edges"]), report["bandwidth_mbps"],
                         backups=tuple(tuple(backup) for backup in report["backup_uplinks"]))


def group_state(group_type, buckets):
    """A group as compared: its type and its buckets [(watch port or None, "output:N" or
    "group:N")], in order for a FAST_FAILOVER group (the first live one is used)."""
    return group_type, (buckets if group_type == "ff" else sorted(buckets, key=str))


def expected_state(view, trees, plans):
    """{switch: state} the live trees and plans call for, in switch_state's form."""
    expected = {switch: ({}, {}, set(), set(), []) for switch in view.switches}
    for report in trees:
        for switch, share in switch_shares(view, tree_of(report)).items():
            groups, meters, flows, _steering, _stream_meters = expected[switch]
            protected = {}
            for index, (primary, backup) in enumerate(share.failover):
                group_id = failover_group_id(report["id"], index)
                groups[group_id] = group_state("ff", [(primary, "output:%d" % primary),
                                                      (backup, "output:%d" % backup)])
                protected[primary] = "group:%d" % group_id
            groups[report["id"]] = group_state("all", [
                (None, protected.get(port, "output:%d" % port)) for port in share.out_ports])
            if share.police_mbps is not None:   # the ingress switch only
                meters[report["id"]] = meter_rate_kbps(report["bandwidth_mbps"])
            flows.update((report["id"], in_port, report["address"]) for in_port in share.in_ports)
    for plan in plans:
        for source, destination, path, rate, ps in plan_streams(plan):
            for hop, (switch, next_node) in enumerate(zip(path[1:-1], path[2:])):
                expected[switch][3].add((plan["id"], view.ip(source), view.ip(destination),
                                         plan["ports"][ps], view.out_port(switch, next_node)))
                if hop == 0:   # each stream is held to its rate on its first switch
                    expected[switch][4].append(meter_rate_kbps(rate))
    for state in expected.values():
        state[4].sort()
    return expected


def plan_streams(plan):
    """[(source, destination, path, Mbit/s, PS)] of a plan's report: legs and aggregates."""
    return ([(worker, leg["node"], leg["path"], leg["rate_mbps"], leg["ps"])
             for worker, legs in plan["workers"].items() for leg in legs]
            + [(a["aggregator"], a["ps"], a["path"], a["rate_mbps"], a["ps"])
               for a in plan["aggregates"]])


def shapes(trees, plans, rounds):
    """What must not change while switches are read (leases count down meanwhile)."""
    return ([(t["id"], t["address"], t["edges"], t["bandwidth_mbps"]) for t in trees],
            [(p["id"], p["revision"]) for p in plans], [r["id"] for r in rounds])


def live(bed):
    """The live trees, plans and rounds."""
    return (bed.client.get("/multicast/trees")["trees"], bed.client.get("/ina/plans")["plans"],
            bed.client.get("/selmcast/rounds")["rounds"])


def problems(bed, view, down_link):
    """What is wrong now (empty if nothing), the live trees, plans and rounds it was
    checked against, and what they book on each link."""
    trees, plans, rounds = live(bed)
    found = []
    reserved = defaultdict(float)
    crossing = [("tree %d" % t["id"], t["edges"], t["bandwidth_mbps"]) for t in trees]
    crossing += [("plan %d" % p["id"], list(zip(path, path[1:])), rate)
                 for p in plans for _s, _d, path, rate, _ps in plan_streams(p)]
    for name, edges, mbps in crossing:
        for tail, head in edges:
            reserved[(tail, head)] += mbps
            if down_link is not None and {tail, head} == set(down_link):
                found.append("%s crosses the link that is down, %s-%s" % (name, tail, head))
    for tree in trees:
        if down_link is not None and any({tail, head} == set(down_link)
                                         for tail, head in backup_links(tree_of(tree))):
            found.append("tree %d's backup uplink crosses the link that is down" % tree["id"])
    for edge, mbps in reserved.items():
        capacity = view.graph.edges[edge]["capacity_mbps"]
        if mbps > capacity * (1 + 1e-6) + 1e-6:
            found.append("%s->%s booked %.3f of %.3f Mbit/s" % (*edge, mbps, capacity))
    tree_ids = {t["id"] for t in trees}
    for round_ in rounds:
        gone = [t["id"] for t in round_["trees"] if t["id"] not in tree_ids]
        if gone:
            found.append("round %d lost its tree(s) %s" % (round_["id"], gone))
    for switch, wanted in expected_state(view, trees, plans).items():
        held = switch_state(switch)
        for what, want, have in zip(("groups", "tree meters", "multicast flows",
                                     "steering flows", "stream meters"), wanted, held):
            if want != have:
                found.append("%s %s: holds %s, the live trees and plans need %s"
                             % (switch, what, have, want))
    if shapes(*live(bed)) != shapes(trees, plans, rounds):
        found.append("trees, plans or rounds changed while the switches were read")   # not settled
    return found, (trees, plans, rounds), reserved


def settled_check(bed, view, down_link, settle_s):
    """problems() until it finds none or settle_s passed (a lease may be mid-release)."""
    deadline = time.monotonic() + settle_s
    while True:
        found, items, reserved = problems(bed, view, down_link)
        if not found or time.monotonic() > deadline:
            return found, items, reserved
        time.sleep(0.2)


def leftovers(switches):
    """{switch: [group, meter, multicast-flow and steering-flow lines]} for switches that
    hold any: empty once every tree and plan is released."""
    found = {}
    for switch in switches:
        lines = ofctl_lines("dump-groups", switch) + ofctl_lines("dump-meters", switch)
        for cookie in (MULTICAST_COOKIE_BASE, STEERING_COOKIE_BASE):
            lines += ofctl_lines("dump-flows", "--no-stats", switch,
                                 "cookie=%#x/%#x" % (cookie, APP_COOKIE_MASK))
        if lines:
            found[switch] = lines
    return found
