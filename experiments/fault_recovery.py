"""Fault recovery: a PS streams a model over a path-aware tree, or workers send a GRID
round of gradients through in-network aggregators, while a fabric link fails, a switch
restarts or the controller is killed, and the tree or the plan carries on.

    python -m experiments.fault_recovery --fault link --runs 5 --out results/fault_recovery.csv
    python -m experiments.fault_recovery --fault link --repair local,mbb --runs 5
    python -m experiments.fault_recovery --traffic gradients --fault link --runs 5

What each --traffic, --fault and --repair does, and every column of the CSV:
docs/fault-recovery.md.
"""

import json
import re
import statistics
import sys
import threading
import time
from pathlib import Path

from tqdm import tqdm

from apps.services import LOCAL_REPAIR_ENV
from experiments import fidelity
from experiments.cli import (announce_rate, build_fabric, experiment_parser, fabric_arguments,
                             fabric_host_count, model_mb_argument, model_mb_at, progress_printer,
                             write_csv)
from experiments.defaults import AGGREGATOR_SHARE
from experiments.ovs import ofctl
from experiments.plots.robustness import plot_fault_recovery
from experiments.sim.fabrics import servers
from experiments.controller_process import wait_until
from experiments.testbed import FabricTestbed
from experiments.traffic.gradients import round_fidelity, run_plan
from experiments.traffic.model_transfer import run_transfer
from experiments.traffic.training import run_training
from mininet_topos.description import describe
from mininet_topos.platform_net import PlatformError
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.hosts.digits_mlp import TrainingSetup

FAULTS = ("link", "switch", "reconnect", "controller")
TRAFFIC = ("tree", "gradients", "training")
REPAIRS = {"local": "1", "mbb": "0"}   # --repair: the controller's SYNCFABRIC_LOCAL_REPAIR
FAULT_ROUND = 3   # --traffic training: the round the fault comes in
# --model-mb auto: what the link moves in this many seconds, so that the fault (0.8 s in by
# default) meets the traffic at any link rate; a killed controller's traffic must outlast a
# restart of ryu-manager (a few seconds)
TRANSFER_S = {"link": 3.0, "switch": 3.0, "reconnect": 3.0, "controller": 8.0}
COLUMNS = ["traffic", "fault", "repair", "run", "gap_ms", "lost_ms", "extra_s", "healthy_s",
           "repaired", "verified",
           "leftovers", "completion_s", "repair_passes", "recovered_s", "during_transfer",
           "failed", "link_mbps"] + fidelity.COLUMNS


def parse_args(argv):
    parser = experiment_parser("experiments.fault_recovery", __doc__)
    fabric_arguments(parser)
    parser.add_argument("--traffic", choices=TRAFFIC, default="tree",
                        help="what runs through the fault: a model over a tree, a GRID round "
                             "of gradients, or experiments.train's job (multicast+ina)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="--traffic training: rounds per run; the fault comes in round %d"
                             % FAULT_ROUND)
    parser.add_argument("--fault", choices=FAULTS, default="link")
    parser.add_argument("--repair", default="local",
                        help="how trees survive a failed link, comma-separated to compare in "
                             "one run (a fresh fabric each): local (the ingress switch fails "
                             "over to a backup uplink by itself, then the controller moves the "
                             "tree) or mbb (the controller's make-before-break move alone)")
    parser.add_argument("--aggregator-bw", type=float,
                        help="--traffic gradients: the top tier's aggregator capacity, Mbit/s "
                             "(default 0.45 x --bw)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=15)
    parser.add_argument("--model-mb", type=model_mb_argument, default="auto",
                        help="model size, MB, or auto (the default): what the link moves in "
                             "%g s, and in %g s for --fault controller, whose transfer must "
                             "outlast a restart of ryu-manager"
                             % (TRANSFER_S["link"], TRANSFER_S["controller"]))
    parser.add_argument("--rate-fraction", type=float, default=0.95,
                        help="reservation and sending rate as a fraction of --bw")
    parser.add_argument("--fail-after-s", type=float, default=0.8,
                        help="when the fault happens, after the tree exists")
    parser.add_argument("--down-s", type=float, default=1.0,
                        help="how long a restarted switch or controller stays away")
    parser.add_argument("--out", type=Path, default=Path("results/fault_recovery.csv"))
    args = parser.parse_args(argv)
    args.repair = args.repair.split(",")
    if not args.repair or set(args.repair) - set(REPAIRS):
        parser.error("--repair takes %s, comma-separated" % " or ".join(REPAIRS))
    model_mb_at(args, TRANSFER_S[args.fault])
    if args.aggregator_bw is None and args.bw is not None:
        args.aggregator_bw = round(AGGREGATOR_SHARE * args.bw, 2)
    hosts = fabric_host_count(args)
    if not 1 <= args.workers < hosts:
        parser.error("--workers must be between 1 and %d" % (hosts - 1))
    if args.runs < 1 or args.fail_after_s < 0:
        parser.error("--runs must be positive, --fail-after-s not negative")
    if args.traffic == "training" and args.rounds < FAULT_ROUND:
        parser.error("--rounds must be at least %d: the fault comes in round %d"
                     % (FAULT_ROUND, FAULT_ROUND))
    return args


class Fault:
    """Breaks what the tree or plan crosses, after_s after it started (the tree exists,
    or round 2's workers began sending: `started`); heal() undoes it. recovered_s:
    from then to a restarted switch or controller being back with every switch synced
    (None for a link: it stays down until the run ends)."""

    def __init__(self, bed, view, kind, traffic, after_s, down_s):
        self.bed, self.view, self.kind, self.traffic = bed, view, kind, traffic
        self.after_s, self.down_s = after_s, down_s
        self.started = threading.Event()
        self.item, self.heal_steps, self.recovered_s = None, [], None
        self.log_mark, self.reconnected = 0, ()   # reconnect: the log before it, the switches

    def inject(self):
        if self.traffic == "tree":
            wait_until(self.live_item, 20, "the PS's tree", poll_s=0.02)
        elif not self.started.wait(180):
            raise RuntimeError("round 2 did not start")
        self.item = self.live_item()
        started = time.monotonic()
        time.sleep(self.after_s)
        if self.kind == "controller":
            self.bed.restart_controller(away_s=self.down_s)
            self.recovered_s = time.monotonic() - started
            return
        tor, upper = self.crossed_uplink()
        if self.kind == "reconnect":
            self.log_mark, self.reconnected = len(self.bed.controller_log()), (tor, upper)
            for switch in (tor, upper):
                self.bed.reconnect_switch(switch)
            self.wait_synced()
            self.recovered_s = time.monotonic() - started
            return
        if self.kind == "link":
            port = self.view.out_port(tor, upper)
            ofctl("mod-port", tor, str(port), "down")
            self.heal_steps.append(lambda: ofctl("mod-port", tor, str(port), "up"))
        else:
            self.bed.reconnect_switch(upper, restart=True, away_s=self.down_s)
            self.wait_synced()
            self.recovered_s = time.monotonic() - started

    def wait_synced(self):
        wait_until(lambda: all(s["synced"] for s in self.bed.client.get("/fabric/topology")["switches"]),
                   20, "every switch back", poll_s=0.02)

    def live_item(self):
        """The tree or plan of this run, or None before it exists."""
        path, key = ("/multicast/trees", "trees") if self.traffic == "tree" else ("/ina/plans", "plans")
        items = self.bed.client.get(path)[key]
        return items[0] if items else None

    def crossed_uplink(self):
        """(top-of-rack switch, the switch above it) of the first fabric link that the
        tree (from h1's switch) or the plan (a worker's leg) takes: on a spine-leaf a
        leaf's uplink to a spine, on a fat-tree an edge's to an aggregation switch."""
        if self.traffic == "tree":
            links = [edge for edge in self.item["edges"] if ["h1", edge[0]] in self.item["edges"]]
        else:
            links = [pair for legs in self.item["workers"].values() for leg in legs
                     for pair in zip(leg["path"][1:], leg["path"][2:])]
        return next((a, b) for a, b in links
                    if self.view.is_switch(a) and self.view.is_switch(b))

    def heal(self):
        for step in self.heal_steps:
            step()
        self.heal_steps = []


def tree_traffic(bed, view, args, _fault):
    hosts = servers(view)
    (result,) = run_transfer(bed, hosts[0], hosts[1:args.workers + 1], "path-aware",
                             args.model_mb, args.rate_fraction * args.bw)
    return result


def gradient_traffic(bed, view, args, fault):
    """Three GRID rounds on one plan: healthy, with the fault, and on the plan the
    controller reports afterwards."""
    hosts = servers(view)
    request = {"job": "fault-recovery", "workers": hosts[:args.workers], "ps": hosts[-1],
               "policy": "grid", "aggregators": sorted(view.aggregators)}

    def on_go(number):
        if number == 2:
            fault.started.set()
    plan, (healthy, faulty, after) = run_plan(bed, request, 3, args.model_mb, on_go=on_go,
                                              follow=True)
    return {"verified": all(r["verified"] for r in (healthy, faulty, after)),
            "completion_s": faulty["comm_time_s"], "healthy_s": healthy["comm_time_s"],
            "extra_s": faulty["comm_time_s"] - healthy["comm_time_s"],
            "repair_passes": faulty["repair_passes"], "healthy": healthy, "plan_id": plan["id"],
            "revision": after["plan_revision"]}


def training_traffic(bed, view, args, fault):
    """experiments.train's multicast+ina job, the fault in round FAULT_ROUND."""
    hosts = servers(view)

    def on_round(number):
        if number == FAULT_ROUND - 1:
            fault.started.set()
    results = run_training(bed, hosts[-1], hosts[:args.workers], "multicast+ina",
                           TrainingSetup(workers=args.workers), args.rounds,
                           args.rate_fraction * args.bw, on_round=on_round,
                           aggregators=sorted(view.aggregators))
    faulty = results[FAULT_ROUND - 1]
    healthy_s = statistics.median(r["round_s"] for r in results if r is not faulty)
    return {"verified": all(r["verified"] and r["test_accuracy"] == r["reference_accuracy"]
                            for r in results),
            "completion_s": faulty["round_s"], "healthy_s": healthy_s,
            "extra_s": faulty["round_s"] - healthy_s,
            "repair_passes": faulty["param_repair_passes"] + faulty["gradient_repair_passes"],
            "fidelity": {k: results[0].get(k) for k in fidelity.COLUMNS}}


def repaired_in(log, args, fault, result):
    """Whether the controller's log says the tree or plan was moved (restored, after a
    controller restart) and kept its id."""
    if fault.item is None:
        return False
    if args.fault == "reconnect":   # both switches were read and reconciled again
        since = log[fault.log_mark:]
        return all("%s (dpid" % switch in since and re.search(
            r"%s \(dpid \w+\): reconciled, synced" % switch, since) for switch in fault.reconnected)
    if args.traffic == "tree":
        return ("tree %d restored" if args.fault == "controller" else
                "tree %d rerouted around failed link(s)") % fault.item["id"] in log
    plan = "plan %d (job %r)" % (fault.item["id"], fault.item["job"])
    if args.fault == "controller":
        return plan + " restored" in log
    return result.get("revision", 1) >= 1 and any(
        "%s %s around" % (plan, how) in log for how in ("moved", "planned again"))


def one_run(bed, view, args, repair, number):
    fault = Fault(bed, view, args.fault, args.traffic, args.fail_after_s, args.down_s)
    failures = []

    def inject():
        try:
            fault.inject()
        except Exception as error:   # reported in the row, the run goes on
            failures.append("fault: %s" % error)
    injector = threading.Thread(target=inject)
    sampler = bed.sampler().start()
    injector.start()
    traffic = {"tree": tree_traffic, "gradients": gradient_traffic,
               "training": training_traffic}[args.traffic]
    try:
        result = traffic(bed, view, args, fault)
    except RuntimeError as error:
        result = {"verified": False}
        fault.started.set()   # an injector still waiting for round 2 gives up
        tqdm.write("run %d: %s" % (number, error), file=sys.stderr)   # all of it, once
        failures.append(str(error).splitlines()[0])
    injector.join()
    usage = sampler.stop()
    fault.heal()
    wait_until(lambda: all(s["synced"] for s in bed.client.get("/fabric/topology")["switches"]),
               20, "every switch back")
    if "healthy" in result:   # the emulator kept up with the healthy round
        verdict = round_fidelity(result["healthy"], usage)
    elif "fidelity" in result:   # ... with the first training round
        verdict = result["fidelity"]
    else:   # loss, and the sender's backing off from it, are the fault's: the CPU decides
        verdict = fidelity.verdict(None, None, None, 0, usage)
    return {"traffic": args.traffic, "fault": args.fault, "repair": repair, "run": number,
            "gap_ms": result.get("gap_ms"), "lost_ms": result.get("lost_ms"),
            "extra_s": result.get("extra_s"),
            "healthy_s": result.get("healthy_s"),
            "repaired": repaired_in(bed.controller_log(), args, fault, result),
            "verified": result["verified"], "leftovers": bed.leftovers(),
            "completion_s": result.get("completion_s"),
            "repair_passes": result.get("repair_passes"), "recovered_s": fault.recovered_s,
            "during_transfer": fault.recovered_s is None or (
                result.get("completion_s") is not None
                and fault.recovered_s < result["completion_s"]),
            "failed": "; ".join(failures), "link_mbps": args.bw, **verdict}


def main(argv=None):
    args = parse_args(argv)
    announce_rate(args)
    aggregators = {} if args.traffic == "tree" else {"aggregators": "top",
                                                     "aggregator_bw": args.aggregator_bw}
    topo = build_fabric(args, **aggregators)
    view = FabricView(describe(topo))
    rows = []
    try:
        for repair in args.repair:
            with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                               progress=progress_printer("fault_recovery"),
                               controller_env={LOCAL_REPAIR_ENV: REPAIRS[repair]}) as bed:
                for number in tqdm(range(1, args.runs + 1), desc="runs (%s)" % repair, unit="run",
                                   file=sys.stderr):
                    row = one_run(bed, view, args, repair, number)
                    print(json.dumps({k: row[k] for k in ("repair", "gap_ms", "lost_ms", "extra_s",
                                                          "repaired", "verified", "leftovers")}),
                          flush=True)
                    rows.append(row)
    except (PlatformError, RuntimeError, ValueError) as error:
        sys.exit("error: %s" % error)
    write_csv([dict(row, leftovers=json.dumps(row["leftovers"])) for row in rows], args.out,
              COLUMNS)
    for repair in args.repair:
        for measure in ("gap_ms", "lost_ms") if args.traffic == "tree" else ("extra_s",):
            values = [row[measure] for row in rows if row["repair"] == repair
                      and row[measure] is not None and fidelity.faithful(row)]
            print("%s: median %s over %d faithful runs: %s" % (
                repair, measure, len(values), "%.3g" % statistics.median(values) if values else "-"))
    if fidelity.unfaithful_note(rows):
        print(fidelity.unfaithful_note(rows))
    print("CSV: %s  figure: %s" % (args.out, plot_fault_recovery(args.out)))
    if not all(row["verified"] and not row["leftovers"] for row in rows):
        sys.exit("error: a run was not verified or left state on a switch")
    unhurt = [row for row in rows if not hurt(row)]
    if unhurt:
        sys.exit("error: in %d of %d runs the fault hurt no traffic, so nothing was measured: "
                 "%s. Give a larger --model-mb or a smaller --fail-after-s (the fault comes "
                 "%.2f s in)" % (len(unhurt), len(rows), "; ".join(
                     "run %d (%s): %s" % (row["run"], row["repair"], why_unhurt(row))
                     for row in unhurt), args.fail_after_s))


def hurt(row):
    """Whether the fault met the traffic: the controller repaired what the fault broke,
    and (a tree's transfer) the transfer was still going when it was over."""
    return row["repaired"] and (row["traffic"] != "tree" or row["during_transfer"])


def why_unhurt(row):
    if not row["repaired"]:
        return "the controller repaired nothing"
    if row["completion_s"] is None:
        return "the transfer's end was not measured"
    return "the transfer ended after %.2f s, before the fault was over" % row["completion_s"]


if __name__ == "__main__":
    main()
