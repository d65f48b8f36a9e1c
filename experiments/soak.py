"""Soak: many clients create and release trees, INA plans and SELMCAST rounds at once
while fabric links flap; after every step, nothing is overbooked and every switch holds
exactly what the live trees, rounds and plans call for.

    python -m experiments.soak --seconds 600 --out results/soak.csv

On a spine-leaf (default 4x4, 2 hosts per leaf, 20 Mbit/s, an aggregator of 9
Mbit/s on every spine) each step runs, all at the same moment, one random
operation per client:
- create (201 or 409): half the time a tree from a random host to 1-5 others at
  1-8 Mbit/s, a third of them with a short lease (0.5-4 s) that runs out on its
  own; else an INA plan (GRID, 2-4 workers to a PS) or a SELMCAST round (2-4
  workers), equally often;
- delete: one of the client's trees, plans or rounds; 200, or 404 if its lease ran out;
- double delete: two DELETEs of one at once; one 200, the other 404;
- foreign delete: another client's; 403 (or 404 if gone);
and, with --flap-probability, takes a leaf's uplink down (ovs-ofctl mod-port)
or brings the one that is down back (live trees and plans move off it). Then it
checks, once the controller has settled (up to --settle-s): the reservations of
the live trees (a round's included) and plans fit every link; no tree or plan
crosses the link that is down, nor does a tree's backup uplink; every round's trees
are live; every switch holds exactly the groups (buckets, FAST_FAILOVER ones
included), meters (rates) and multicast flows of the live trees and the steering
flows and meters of the live plans, nothing else; no answer outside the expected
ones; no traceback in the controller log. At the end everything is released and
nothing may be left on a switch.

Writes a CSV (one row per step) and a PNG, prints one JSON summary
(operations, faults, violations, ...); exits non-zero on any violation.
"""

import json
import random
import re
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from tqdm import tqdm

from experiments.cli import ArgumentParser, fabric_arguments, progress_printer, write_csv
from experiments.plots import plot_soak
from experiments.sim.fabrics import servers
from experiments.testbed import FabricTestbed, ofctl, ofctl_lines
from mininet_topos.description import describe
from mininet_topos.platform_net import PlatformError
from mininet_topos.spineleaf import SpineLeafTopo
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.multicast_trees import MulticastTree, backup_links, switch_shares
from syncfabric.hosts.controller_client import ControllerClient, ControllerHttpError
from syncfabric.openflow.builders import (APP_COOKIE_MASK, MULTICAST_COOKIE_BASE,
                                          STEERING_COOKIE_BASE, STEERING_METER_BASE,
                                          failover_group_id, meter_rate_kbps)

EXPECTED = {"create": {201, 409}, "delete": {200, 404}, "foreign delete": {403, 404}}
RESOURCES = {"tree": "/multicast/trees", "plan": "/ina/plans", "round": "/selmcast/rounds"}
AGGREGATOR_BW = 9.0
DOUBLE_DELETE_ANSWERS = ([200, 404], [404, 404])   # one wins, unless the lease was first
COLUMNS = ["step", "elapsed_s", "operations", "faults", "down_link", "live_trees", "live_plans",
           "live_rounds",            "max_reserved_fraction", "violations"]


def parse_args(argv):
    parser = ArgumentParser(prog="python -m experiments.soak", description=__doc__.split("\n\n")[0])
    fabric_arguments(parser, spines=4, leaves=4, bw=20.0)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to soak")
    parser.add_argument("--clients", type=int, default=4, help="concurrent REST clients")
    parser.add_argument("--flap-probability", type=float, default=0.3,
                        help="chance per step that a link goes down or comes back")
    parser.add_argument("--settle-s", type=float, default=5.0,
                        help="how long the switches may take to match the controller's report")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/soak.csv"))
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.clients < 1 or not 0 <= args.flap_probability <= 1:
        parser.error("--seconds and --clients must be positive, --flap-probability in [0, 1]")
    if args.leaves * args.hosts_per_leaf < 2:
        parser.error("the fabric needs at least 2 hosts")
    return args


class Client:
    """One REST client (its own release key) and the trees, plans and rounds it created."""

    def __init__(self, base_url, rng, name):
        self.rest = ControllerClient(base_url)
        self.rng, self.name = rng, name
        self.items = []   # (resource, id)

    def status(self, method, path, body=None):
        try:
            answer = self.rest.request(method, path, body)
            return (201 if method == "POST" else 200), answer
        except ControllerHttpError as error:
            return error.status, error.body

    def operation(self, hosts, others):
        """(kind, [status, ...], detail) of one random operation."""
        choice = self.rng.random()
        if not self.items or choice < 0.4:
            return self.create(hosts)
        item = self.rng.choice(self.items)
        path = "%s/%d" % (RESOURCES[item[0]], item[1])
        if choice < 0.7:
            self.items.remove(item)
            status, answer = self.status("DELETE", path)
            return "delete", [status], answer
        if choice < 0.85:
            self.items.remove(item)
            answers = [None, None]

            def delete(index):
                answers[index] = self.status("DELETE", path)
            threads = [threading.Thread(target=delete, args=(i,)) for i in range(2)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            statuses = sorted(status for status, _ in answers)
            return "double delete", statuses, [a for _, a in answers]
        theirs = [theirs for other in others for theirs in other.items]
        if not theirs:
            return self.create(hosts)
        resource, item_id = self.rng.choice(theirs)
        status, answer = self.status("DELETE", "%s/%d" % (RESOURCES[resource], item_id))
        return "foreign delete", [status], answer

    def create(self, hosts):
        choice = self.rng.random()
        if choice < 0.5:
            resource = "tree"
            source, *receivers = self.rng.sample(hosts, self.rng.randint(2, min(6, len(hosts))))
            body = {"source": source, "receivers": receivers,
                    "bandwidth_mbps": self.rng.randint(1, 8),
                    "ttl_s": round(self.rng.uniform(0.5, 4.0), 1) if self.rng.random() < 1 / 3
                    else None}
        elif choice < 0.75:
            resource = "plan"
            *workers, ps = self.rng.sample(hosts, self.rng.randint(3, min(5, len(hosts))))
            body = {"job": "soak-%s" % self.name, "workers": workers, "ps": ps, "gradient_mb": 1}
        else:
            resource = "round"
            body = {"job": "soak-%s" % self.name, "update_mb": 0.2, "p": 1,
                    "workers": self.rng.sample(hosts, self.rng.randint(2, min(4, len(hosts))))}
        status, answer = self.status("POST", RESOURCES[resource], body)
        if status == 201:
            self.items.append((resource, answer["id"]))
        return "create", [status], answer


def unexpected(kind, statuses):
    if kind == "double delete":
        return statuses not in DOUBLE_DELETE_ANSWERS
    return statuses[0] not in EXPECTED[kind]


class LinkFlapper:
    """Takes one leaf uplink down at a time (the leaf's port) and brings it back."""

    def __init__(self, view, rng):
        self.view, self.rng = view, rng
        self.uplinks = sorted((leaf, spine) for leaf in view.switches
                              if view.graph.nodes[leaf]["role"] == "leaf"
                              for spine in view.graph.successors(leaf)
                              if view.graph.nodes[spine]["role"] == "spine")
        self.down = None

    def flap(self):
        if self.down is None:
            self.down = self.rng.choice(self.uplinks)
            self._set("down")
        else:
            self._set("up")
            self.down = None

    def restore(self):
        if self.down is not None:
            self.flap()

    def _set(self, state):
        leaf, spine = self.down
        ofctl("mod-port", leaf, str(self.view.out_port(leaf, spine)), state)


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
                            "cookie=%#x/%#x" % (MULTICAST_COOKIE_BASE, APP_COOKIE_MASK)):
        cookie = int(re.search(r"cookie=(0x[0-9a-f]+)", line).group(1), 16)
        in_port = int(re.search(r"in_port=(\d+)", line).group(1))
        flows.add((cookie & ~APP_COOKIE_MASK, in_port, re.search(r"nw_dst=([\d.]+)", line).group(1)))
    steering = set()
    for line in ofctl_lines("dump-flows", "--no-stats", switch,
                            "cookie=%#x/%#x" % (STEERING_COOKIE_BASE, APP_COOKIE_MASK)):
        cookie = int(re.search(r"cookie=(0x[0-9a-f]+)", line).group(1), 16)
        steering.add((cookie & ~APP_COOKIE_MASK, re.search(r"nw_src=([\d.]+)", line).group(1),
                      re.search(r"nw_dst=([\d.]+)", line).group(1),
                      int(re.search(r"tp_dst=(\d+)", line).group(1)),
                      int(re.search(r"output:(\d+)", line).group(1))))
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


def soak(bed, view, args, say):
    rng = random.Random(args.seed)
    hosts = servers(view)
    clients = [Client(bed.client.base_url, random.Random(rng.random()), "c%d" % number)
               for number in range(args.clients)]
    flapper = LinkFlapper(view, random.Random(rng.random()))
    outcomes, rows = defaultdict(Counter), []
    faults = violations = 0
    started = time.monotonic()
    progress = tqdm(total=round(args.seconds), desc="soak", unit="s", file=sys.stderr)
    try:
        while time.monotonic() - started < args.seconds:
            results, threads = [None] * len(clients), []
            for index, client in enumerate(clients):
                others = [c for c in clients if c is not client]

                def act(index=index, client=client, others=others):
                    results[index] = client.operation(hosts, others)
                threads.append(threading.Thread(target=act))
            flap = rng.random() < args.flap_probability
            if flap:
                threads.append(threading.Thread(target=flapper.flap))
                faults += 1
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            found = []
            for kind, statuses, answer in results:
                outcomes[kind].update(statuses)
                if unexpected(kind, statuses):
                    found.append("%s answered %s: %s" % (kind, statuses, answer))
            check, (trees, plans, rounds), reserved = settled_check(bed, view, flapper.down,
                                                                    args.settle_s)
            found += check
            if "Traceback" in bed.controller_log():
                found.append("a traceback in the controller log")
            for problem in found:
                say("violation in step %d: %s" % (len(rows) + 1, problem))
            violations += len(found)
            alive = {("tree", t["id"]) for t in trees}
            for client in clients:   # leases take trees away too, and failures trees and plans
                client.items = [item for item in client.items
                                if item[0] != "tree" or item in alive]
            elapsed = time.monotonic() - started
            rows.append({"step": len(rows) + 1, "elapsed_s": round(elapsed, 3),
                         "operations": len(results), "faults": int(flap),
                         "down_link": "-".join(flapper.down) if flapper.down else "",
                         "live_trees": len(trees), "live_plans": len(plans),
                         "live_rounds": len(rounds),
                         "max_reserved_fraction": round(max(
                             [mbps / view.graph.edges[e]["capacity_mbps"]
                              for e, mbps in reserved.items()], default=0.0), 4),
                         "violations": len(found)})
            progress.update(min(round(elapsed), round(args.seconds)) - progress.n)
            if found and "a traceback in the controller log" in found:
                break   # the log says it once and for all
    finally:
        progress.close()
        flapper.restore()
    for client in clients:
        for resource, item_id in client.items:
            status, answer = client.status("DELETE", "%s/%d" % (RESOURCES[resource], item_id))
            if status not in (200, 404):
                violations += 1
                say("violation at the end: DELETE of %s %d answered %d: %s"
                    % (resource, item_id, status, answer))
    return rows, outcomes, faults, violations


def main(argv=None):
    args = parse_args(argv)
    topo = SpineLeafTopo(spines=args.spines, leaves=args.leaves, hosts_per_leaf=args.hosts_per_leaf,
                         bw=args.bw, aggregators="spines", aggregator_bw=AGGREGATOR_BW)
    view = FabricView(describe(topo))
    say = progress_printer("soak")
    try:
        with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                           progress=say) as bed:
            rows, outcomes, faults, violations = soak(bed, view, args, say)
            leftovers = bed.leftovers()
            log = bed.log_path
    except (PlatformError, RuntimeError, ValueError) as error:
        sys.exit("error: %s" % error)
    write_csv(rows, args.out, COLUMNS)
    summary = {"seconds": args.seconds, "steps": len(rows),
               "operations": sum(row["operations"] for row in rows),
               "requests": sum(sum(c.values()) for c in outcomes.values()),
               "answers": {kind: dict(sorted(c.items())) for kind, c in sorted(outcomes.items())},
               "faults": faults, "violations": violations + bool(leftovers),
               "leftovers": leftovers,
               **{"max_" + column: max((r[column] for r in rows), default=0)
                  for column in ("live_trees", "live_plans", "live_rounds")}}
    print(json.dumps(summary), flush=True)
    print("CSV: %s  figure: %s  controller log: %s" % (args.out, plot_soak(args.out), log))
    if summary["violations"]:
        sys.exit("error: %d violation(s)" % summary["violations"])


if __name__ == "__main__":
    main()
