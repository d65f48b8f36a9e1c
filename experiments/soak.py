"""Soak: many clients create and release trees, INA plans and SELMCAST rounds at once
while fabric links flap; after every step, nothing is overbooked and every switch holds
exactly what the live trees, rounds and plans call for.

    python -m experiments.soak --seconds 600 --out results/soak.csv

On a spine-leaf (default 4x4, 2 hosts per leaf, 20 Mbit/s, an aggregator of 0.45
x --bw on every spine) each step runs, all at the same moment, one random
operation per client:
- create (201 or 409): half the time a tree from a random host to 1-5 others at
  5-40% of --bw (1-8 Mbit/s at 20), a third of them with a short lease (0.5-4 s) that runs out on its
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
import sys
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

from tqdm import tqdm

from experiments.cli import (build_fabric, experiment_parser, fabric_arguments, fabric_host_count,
                             progress_printer, write_csv)
from experiments.defaults import AGGREGATOR_SHARE
from experiments.ovs import ofctl
from experiments.plots.robustness import plot_soak
from experiments.sim.fabrics import servers
from experiments.switch_oracle import settled_check
from experiments.testbed import FabricTestbed
from mininet_topos.description import describe
from mininet_topos.platform_net import PlatformError
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.hosts.transport.controller_client import ControllerClient, ControllerHttpError

EXPECTED = {"create": {201, 409}, "delete": {200, 404}, "foreign delete": {403, 404}}
RESOURCES = {"tree": "/multicast/trees", "plan": "/ina/plans", "round": "/selmcast/rounds"}
# a tree's bandwidth, as a share of the link rate: at most 2 such trees fill a link, so that
# creates are often refused (409) and the reservations are often near full
TREE_SHARES = (0.05, 0.4)
DOUBLE_DELETE_ANSWERS = ([200, 404], [404, 404])   # one wins, unless the lease was first
COLUMNS = ["step", "elapsed_s", "operations", "faults", "down_link", "live_trees", "live_plans",
           "live_rounds",            "max_reserved_fraction", "violations"]


def parse_args(argv):
    parser = experiment_parser("experiments.soak", __doc__)
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
    if fabric_host_count(args) < 2:
        parser.error("the fabric needs at least 2 hosts")
    return args


class Client:
    """One REST client (its own release key) and the trees, plans and rounds it created."""

    def __init__(self, base_url, rng, name, link_mbps):
        self.rest = ControllerClient(base_url)
        self.rng, self.name, self.link_mbps = rng, name, link_mbps
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
                    "bandwidth_mbps": round(self.rng.uniform(*TREE_SHARES) * self.link_mbps, 2),
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


def soak(bed, view, args, say):
    rng = random.Random(args.seed)
    hosts = servers(view)
    clients = [Client(bed.client.base_url, random.Random(rng.random()), "c%d" % number,
                      args.bw) for number in range(args.clients)]
    flapper = LinkFlapper(view, random.Random(rng.random()))
    outcomes, rows = defaultdict(Counter), []
    faults = violations = 0
    started = time.monotonic()
    progress = tqdm(total=round(args.seconds), desc="soak", unit="s", file=sys.stderr)
    try:
        while time.monotonic() - started < args.seconds:
            flap = rng.random() < args.flap_probability
            faults += flap
            results = operations_at_once(clients, hosts, flapper if flap else None)
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
    violations += release_everything(clients, say)
    return rows, outcomes, faults, violations


def operations_at_once(clients, hosts, flapper=None):
    """One random operation per client, and a link flap if a flapper is given, all at
    the same moment; each client's (kind, statuses, answer)."""
    results, threads = [None] * len(clients), []
    for index, client in enumerate(clients):
        others = [c for c in clients if c is not client]

        def act(index=index, client=client, others=others):
            results[index] = client.operation(hosts, others)
        threads.append(threading.Thread(target=act))
    if flapper is not None:
        threads.append(threading.Thread(target=flapper.flap))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def release_everything(clients, say):
    """DELETE what every client still holds; how many answers were neither 200 nor 404
    (each a violation, said)."""
    violations = 0
    for client in clients:
        for resource, item_id in client.items:
            status, answer = client.status("DELETE", "%s/%d" % (RESOURCES[resource], item_id))
            if status not in (200, 404):
                violations += 1
                say("violation at the end: DELETE of %s %d answered %d: %s"
                    % (resource, item_id, status, answer))
    return violations


def main(argv=None):
    args = parse_args(argv)
    topo = build_fabric(args, aggregators="top", aggregator_bw=AGGREGATOR_SHARE * args.bw)
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
