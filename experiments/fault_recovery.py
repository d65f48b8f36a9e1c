"""Fault recovery: a PS streams a model over a path-aware tree while a fabric link fails,
a switch restarts or the controller is killed, and the tree carries on.

    python -m experiments.fault_recovery --fault link --runs 5 --out results/fault_recovery.csv

On a spine-leaf (default 8x8, 2 hosts per leaf, 20 Mbit/s), h1 sends a real
model to the next --workers hosts over a reserved path-aware tree
(experiments/traffic/model_transfer.py). --fail-after-s into the transfer:
- link: the tree's uplink from h1's leaf goes down (ovs-ofctl mod-port ...
  down); it comes back after the run;
- switch: the spine the tree crosses restarts: it loses its controller
  connection and all its tables, and connects again --down-s later;
- controller: ryu-manager is killed and started again --down-s later; it
  restores the fabric and the tree from its state directory, and each switch
  is reconciled as it connects (the PS's REST calls wait for it meanwhile).
Each run prints one JSON object: gap_ms (the longest time any worker saw no
tree packets in the first pass, i.e. around the failure), repaired (the tree
was moved, or for a controller restored, and kept its id), verified (every
worker's SHA-256 matched in the end), leftovers (groups, meters and multicast
flows left after the release; must be empty). The CSV adds recovered_s (until
a restarted switch or controller was back and every switch synced) and
during_transfer (that happened while the model was still streaming, so gap_ms
covers it). Writes a CSV and a PNG, and prints the median gap.
"""

import json
import statistics
import sys
import threading
import time
from pathlib import Path

from tqdm import tqdm

from apps.fabric_view import FabricView
from experiments import fidelity
from experiments.cli import announce_rate, ArgumentParser, fabric_arguments, progress_printer, write_csv
from experiments.plots import plot_fault_recovery
from experiments.testbed import FabricTestbed, ofctl, wait_until
from experiments.traffic.model_transfer import run_transfer
from mininet_topos.description import describe
from mininet_topos.platform_net import PlatformError
from mininet_topos.spineleaf import SpineLeafTopo

FAULTS = ("link", "switch", "controller")
COLUMNS = ["fault", "run", "gap_ms", "repaired", "verified", "leftovers", "completion_s",
           "repair_passes", "recovered_s", "during_transfer", "failed", "link_mbps"] + fidelity.COLUMNS


def parse_args(argv):
    parser = ArgumentParser(prog="python -m experiments.fault_recovery",
                            description=__doc__.split("\n\n")[0])
    fabric_arguments(parser)
    parser.add_argument("--fault", choices=FAULTS, default="link")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=15)
    parser.add_argument("--model-mb", type=float,
                        help="model size (default 4, and 16 for --fault controller: its "
                             "transfer must outlast a restart of ryu-manager)")
    parser.add_argument("--rate-fraction", type=float, default=0.95,
                        help="reservation and sending rate as a fraction of --bw")
    parser.add_argument("--fail-after-s", type=float, default=0.8,
                        help="when the fault happens, after the tree exists")
    parser.add_argument("--down-s", type=float, default=1.0,
                        help="how long a restarted switch or controller stays away")
    parser.add_argument("--out", type=Path, default=Path("results/fault_recovery.csv"))
    args = parser.parse_args(argv)
    if args.model_mb is None:
        args.model_mb = 16.0 if args.fault == "controller" else 4.0
    if not 1 <= args.workers < args.leaves * args.hosts_per_leaf:
        parser.error("--workers must be between 1 and %d" % (args.leaves * args.hosts_per_leaf - 1))
    if args.runs < 1 or args.model_mb <= 0 or args.fail_after_s < 0:
        parser.error("--runs and --model-mb must be positive, --fail-after-s not negative")
    return args


class Fault:
    """Waits for the PS's tree, then breaks what it crosses; heal() undoes it.
    recovered_s: from the tree's start to a restarted switch or controller being back
    with every switch synced (None for a link: it stays down until the run ends)."""

    def __init__(self, bed, view, kind, after_s, down_s):
        self.bed, self.view, self.kind = bed, view, kind
        self.after_s, self.down_s = after_s, down_s
        self.tree, self.heal_steps, self.recovered_s = None, [], None

    def inject(self):
        def tree():
            trees = self.bed.client.get("/multicast/trees")["trees"]
            return trees[0] if trees else None
        wait_until(tree, 20, "the PS's tree", poll_s=0.02)
        self.tree = tree()
        started = time.monotonic()
        time.sleep(self.after_s)
        if self.kind == "controller":
            self.bed.restart_controller(away_s=self.down_s)
            self.recovered_s = time.monotonic() - started
            return
        leaf = next(s for s in self.view.switches if self.view.graph.nodes[s]["role"] == "leaf"
                    and ["h1", s] in self.tree["edges"])
        spine = next(child for parent, child in self.tree["edges"] if parent == leaf)
        if self.kind == "link":
            port = self.view.out_port(leaf, spine)
            ofctl("mod-port", leaf, str(port), "down")
            self.heal_steps.append(lambda: ofctl("mod-port", leaf, str(port), "up"))
        else:
            self.bed.reconnect_switch(spine, restart=True, away_s=self.down_s)
            wait_until(lambda: all(s["synced"] for s in
                                   self.bed.client.get("/fabric/topology")["switches"]),
                       20, "every switch back", poll_s=0.02)
            self.recovered_s = time.monotonic() - started

    def heal(self):
        for step in self.heal_steps:
            step()
        self.heal_steps = []


def one_run(bed, view, args, number):
    hosts = sorted(view.hosts, key=lambda h: int(h[1:]))
    fault = Fault(bed, view, args.fault, args.fail_after_s, args.down_s)
    failures = []

    def inject():
        try:
            fault.inject()
        except Exception as error:   # reported in the row, the run goes on
            failures.append("fault: %s" % error)
    injector = threading.Thread(target=inject)
    sampler = bed.sampler().start()
    injector.start()
    try:
        (result,) = run_transfer(bed, hosts[0], hosts[1:args.workers + 1], "path-aware",
                                 args.model_mb, args.rate_fraction * args.bw)
    except RuntimeError as error:
        result = {"verified": False}
        tqdm.write("run %d: %s" % (number, error), file=sys.stderr)   # all of it, once
        failures.append(str(error).splitlines()[0])
    injector.join()
    usage = sampler.stop()
    fault.heal()
    wait_until(lambda: all(s["synced"] for s in bed.client.get("/fabric/topology")["switches"]),
               20, "every switch back")
    log = bed.controller_log()
    repaired = fault.tree is not None and (
        ("tree %d restored" if args.fault == "controller" else
         "tree %d rerouted around failed link(s)") % fault.tree["id"] in log)
    return {"fault": args.fault, "run": number, "gap_ms": result.get("gap_ms"),
            "repaired": repaired, "verified": result["verified"],
            "leftovers": bed.leftovers(), "completion_s": result.get("completion_s"),
            "repair_passes": result.get("repair_passes"), "recovered_s": fault.recovered_s,
            "during_transfer": fault.recovered_s is None or (
                result.get("completion_s") is not None
                and fault.recovered_s < result["completion_s"]),
            "failed": "; ".join(failures), "link_mbps": args.bw,
            # loss, and the sender's backing off from it, are the fault's: the CPU decides
            **fidelity.verdict(None, None, None, 0, usage)}


def main(argv=None):
    args = parse_args(argv)
    announce_rate(args)
    topo = SpineLeafTopo(spines=args.spines, leaves=args.leaves, hosts_per_leaf=args.hosts_per_leaf,
                         bw=args.bw)
    view = FabricView(describe(topo))
    rows = []
    try:
        with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                           progress=progress_printer("fault_recovery")) as bed:
            for number in tqdm(range(1, args.runs + 1), desc="runs", unit="run", file=sys.stderr):
                row = one_run(bed, view, args, number)
                print(json.dumps({k: row[k] for k in ("gap_ms", "repaired", "verified",
                                                      "leftovers")}), flush=True)
                rows.append(row)
    except (PlatformError, RuntimeError, ValueError) as error:
        sys.exit("error: %s" % error)
    write_csv([dict(row, leftovers=json.dumps(row["leftovers"])) for row in rows], args.out,
              COLUMNS)
    gaps = [row["gap_ms"] for row in rows if row["gap_ms"] is not None and fidelity.faithful(row)]
    print("median gap_ms over %d faithful runs: %s" % (len(gaps), "%.0f" % statistics.median(gaps)
                                                       if gaps else "-"))
    if fidelity.unfaithful_note(rows):
        print(fidelity.unfaithful_note(rows))
    print("CSV: %s  figure: %s" % (args.out, plot_fault_recovery(args.out)))
    if not all(row["during_transfer"] for row in rows):
        print("warning: in some runs the transfer ended before the fault was over; a larger "
              "--model-mb makes gap_ms cover it")
    if not all(row["verified"] and not row["leftovers"] for row in rows):
        sys.exit("error: a run was not verified or left state on a switch")


if __name__ == "__main__":
    main()
