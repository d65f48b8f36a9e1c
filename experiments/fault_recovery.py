"""Fault recovery: a PS streams a model over a path-aware tree, workers send a GRID round
of gradients through in-network aggregators, or a job runs its rounds, while a fabric
link fails, a switch restarts or the controller is killed, and the traffic carries on.

    python -m experiments.fault_recovery --fault link --runs 5 --out results/fault_recovery.csv
    python -m experiments.fault_recovery --fault link --repair local,mbb --runs 5
    python -m experiments.fault_recovery --traffic gradients --fault link --runs 5
    python -m experiments.fault_recovery --traffic job --workers 8 --fault controller --runs 3

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
                             fabric_host_count, fit_auto_rate, model_mb_argument, model_mb_at,
                             progress_printer, write_csv)
from experiments.controller_process import wait_until
from experiments.defaults import AGGREGATOR_SHARE
from experiments.fault_traffic import FAULT_ROUND, RUNNERS, TRAFFIC, job_request, model_floats
from experiments.ovs import ofctl
from experiments.plots.robustness import plot_fault_recovery
from experiments.testbed import FabricTestbed
from experiments.sim.fabrics import servers
from experiments.traffic.jobs import papers_plan, plan_load_mbps
from mininet_topos.description import describe
from mininet_topos.platform_net import PlatformError
from syncfabric.decisions import round_planner
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.hosts.packets.gradient_wire import wire_mbit

FAULTS = ("link", "switch", "reconnect", "controller")
REPAIRS = {"local": "1", "mbb": "0"}   # --repair: the controller's SYNCFABRIC_LOCAL_REPAIR
# --model-mb auto: what the link moves in this many seconds, so that the fault (0.8 s in by
# default) meets the traffic at any link rate; a killed controller's traffic must outlast a
# restart of ryu-manager (a few seconds). A job's model is one round's: its rounds, a few
# a restart long, go on before, through and after the fault.
TRANSFER_S = 3.0              # a fault in the data plane's
CONTROLLER_TRANSFER_S = 8.0   # a killed controller's
JOB_ROUND_S = 0.5
JOB_TRAFFIC = ("gradients", "job")   # their rounds are a job's whole-number rounds
DEFAULT_WORKERS = {"job": 8}     # else 15
DEFAULT_ROUNDS = {"job": 10, "gradients": 10}     # else 5 (--traffic training)
# what the traffic's runner (experiments/fault_traffic.py) measured, where it did
MEASURED = ("gap_ms", "lost_ms", "baseline_gap_ms", "baseline_lost_ms", "extra_s", "healthy_s",
            "faulty_rounds", "resent", "healthy_resent", "completion_s", "repair_passes")
RESTART_PHASES = ("answering_s", "synced_s", "controller_cpu_s")
SUMMARIZED = {"tree": ("gap_ms", "lost_ms", "baseline_gap_ms", "baseline_lost_ms"),
              "job": ("extra_s", "resent", "healthy_resent"),
              "gradients": ("extra_s", "resent", "healthy_resent")}
COLUMNS = ["traffic", "fault", "repair", "run", "gap_ms", "lost_ms", "baseline_gap_ms",
           "baseline_lost_ms", "extra_s", "healthy_s", "faulty_rounds", "resent",
           "healthy_resent", "reconcile_changes", "gap_at_s", *RESTART_PHASES, "repaired",
           "verified", "leftovers", "completion_s", "repair_passes", "recovered_s",
           "during_transfer", "failed", "link_mbps"] + fidelity.COLUMNS


def parse_args(argv):
    parser = experiment_parser("experiments.fault_recovery", __doc__)
    fabric_arguments(parser)
    parser.add_argument("--traffic", choices=TRAFFIC, default="tree",
                        help="what runs through the fault: a model over a tree, GRID's rounds "
                             "of gradients as a job (multicast+ina), experiments.train's job "
                             "(multicast+ina), or a job's rounds (POST /jobs)")
    parser.add_argument("--rounds", type=int,
                        help="--traffic gradients, training and job: rounds per run; the fault "
                             "comes in round %d (default %d, and %d for gradients and a job)"
                             % (FAULT_ROUND, 5, DEFAULT_ROUNDS["job"]))
    parser.add_argument("--fault", choices=FAULTS, default="link")
    parser.add_argument("--repair", default="local",
                        help="how trees survive a failed link, comma-separated to compare in "
                             "one run (a fresh fabric each): local (the ingress switch fails "
                             "over to a backup uplink by itself, then the controller moves the "
                             "tree) or mbb (the controller's make-before-break move alone)")
    parser.add_argument("--aggregator-bw", type=float,
                        help="--traffic gradients, training and job: the top tier's aggregator "
                             "capacity, Mbit/s (default 0.45 x --bw)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--workers", type=int,
                        help="receivers of the tree, or workers (default 15, and %d for a job)"
                             % DEFAULT_WORKERS["job"])
    parser.add_argument("--model-mb", type=model_mb_argument, default="auto",
                        help="model size, MB, or auto (the default): what the link moves in "
                             "%g s, in %g s for --fault controller, whose transfer must "
                             "outlast a restart of ryu-manager, and in %g s for a job (a "
                             "round's model)"
                             % (TRANSFER_S, CONTROLLER_TRANSFER_S, JOB_ROUND_S))
    parser.add_argument("--rate-fraction", type=float, default=0.95,
                        help="reservation and sending rate as a fraction of --bw")
    parser.add_argument("--fail-after-s", type=float, default=0.8,
                        help="when the fault happens, after the tree exists (or the round "
                             "with the fault started)")
    parser.add_argument("--down-s", type=float, default=1.0,
                        help="how long a restarted switch or controller stays away")
    parser.add_argument("--out", type=Path, default=Path("results/fault_recovery.csv"))
    args = parser.parse_args(argv)
    args.repair = args.repair.split(",")
    if not args.repair or set(args.repair) - set(REPAIRS):
        parser.error("--repair takes %s, comma-separated" % " or ".join(REPAIRS))
    args.workers = args.workers or DEFAULT_WORKERS.get(args.traffic, 15)
    args.rounds = args.rounds or DEFAULT_ROUNDS.get(args.traffic, 5)
    hosts = fabric_host_count(args)
    fewest = 1 if args.traffic == "tree" else 2
    if not fewest <= args.workers < hosts:
        parser.error("--workers must be between %d and %d" % (fewest, hosts - 1))
    if args.runs < 1 or args.fail_after_s < 0:
        parser.error("--runs must be positive, --fail-after-s not negative")
    if args.traffic != "tree" and args.rounds < FAULT_ROUND:
        parser.error("--rounds must be at least %d: the fault comes in round %d"
                     % (FAULT_ROUND, FAULT_ROUND))
    if args.traffic != "tree" and args.bw is not None:
        fit_auto_rate(args, lambda: job_load_mbps(args))
    model_mb_at(args, JOB_ROUND_S if args.traffic in JOB_TRAFFIC else
                CONTROLLER_TRANSFER_S if args.fault == "controller" else TRANSFER_S)
    if args.aggregator_bw is None and args.bw is not None:
        args.aggregator_bw = round(AGGREGATOR_SHARE * args.bw, 2)
    return args


def job_load_mbps(args):
    """The Mbit/s of flows the job of --traffic gradients, training or job puts on the
    fabric at --bw, as the controller would plan it (for --bw auto to fit it to the
    machine). Its rates fill the links whatever the model's size; the size planned is
    --model-mb's, or auto's."""
    topo = build_fabric(args, aggregators="top", aggregator_bw=AGGREGATOR_SHARE * args.bw)
    view = FabricView(describe(topo))
    model_mb = JOB_ROUND_S * args.bw / 8 if args.model_mb == "auto" else args.model_mb
    if args.traffic == "job":
        request = job_request(view, args.workers, model_mb)
        return plan_load_mbps(round_planner.plan_job(view, request["workers"],
                                                     wire_mbit(request["model_bytes"] // 4)))
    hosts = servers(view)
    return plan_load_mbps(papers_plan(view, "multicast+ina", hosts[-1], hosts[:args.workers],
                                      model_floats(model_mb)))


class Fault:
    """Breaks what the tree or plan crosses, after_s after the traffic it should meet
    started (`started`: the baseline transfer is over and the tree of the next exists,
    round 2's workers began sending, or a job's round FAULT_ROUND is due); heal() undoes
    it. hit_at and over_at: when it struck and when a restarted switch or controller was
    back with every switch synced (time.time(); over_at None for a link: it stays down
    until the run ends), recovered_s from `started` to then. log_mark: the controller's
    log before it struck (what the reconciliations after it sent is counted from there)."""

    def __init__(self, bed, view, kind, traffic, after_s, down_s):
        self.bed, self.view, self.kind, self.traffic = bed, view, kind, traffic
        self.after_s, self.down_s = after_s, down_s
        self.started = threading.Event()
        self.item, self.heal_steps, self.recovered_s = None, [], None
        self.hit_at = self.over_at = None
        # --fault controller: when the restarted controller answered and every switch was
        # synced (after the kill), and the CPU seconds it took until then
        self.restart = {}
        self.log_mark, self.reconnected = 0, ()   # reconnect: the switches

    def inject(self):
        if not self.started.wait(180):
            raise RuntimeError("the traffic the fault should meet did not start")
        if self.traffic == "tree":
            wait_until(self.live_item, 20, "the PS's tree", poll_s=0.02)
        self.item = self.live_item()
        started = time.monotonic()
        time.sleep(self.after_s)
        self.log_mark, self.hit_at = len(self.bed.controller_log()), time.time()
        if self.kind == "controller":
            self.restart = self.bed.restart_controller(away_s=self.down_s)
            self.recovered(started)
            self.restart["controller_cpu_s"] = self.bed.controller.cpu_seconds()
            return
        tor, upper = self.crossed_uplink()
        if self.kind == "reconnect":
            self.reconnected = (tor, upper)
            for switch in (tor, upper):
                self.bed.reconnect_switch(switch)
            self.wait_synced()
            self.recovered(started)
            return
        if self.kind == "link":
            port = self.view.out_port(tor, upper)
            ofctl("mod-port", tor, str(port), "down")
            self.heal_steps.append(lambda: ofctl("mod-port", tor, str(port), "up"))
        else:
            self.bed.reconnect_switch(upper, restart=True, away_s=self.down_s)
            self.wait_synced()
            self.recovered(started)

    def recovered(self, started):
        self.recovered_s, self.over_at = time.monotonic() - started, time.time()

    def overlaps(self, start, end):
        """Whether traffic from `start` to `end` (time.time()) ran while the fault lasted."""
        return self.hit_at is not None and self.hit_at <= end and (
            self.over_at is None or start <= self.over_at)

    def wait_synced(self):
        wait_until(lambda: all(s["synced"] for s in self.bed.client.get("/fabric/topology")["switches"]),
                   20, "every switch back", poll_s=0.02)

    def live_item(self):
        """The tree or plan (a job's too) of this run, or None before it exists."""
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


def reconcile_changes(log, fault):
    """How many messages the reconciliations after the fault sent the switches (the
    controller logs each: "...; N changes sent"): none, where every switch kept what was
    right through it."""
    if fault.hit_at is None:
        return None
    return sum(int(count) for count in re.findall(r"; (\d+) changes sent", log[fault.log_mark:]))


def gap_at_s(result, fault):
    """A tree's: when the longest silence any worker saw in the faulty transfer ended,
    in seconds after the fault struck (negative: before it)."""
    if result.get("gap_ended_at") is None or fault.hit_at is None:
        return None
    return result["gap_ended_at"] - fault.hit_at


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
    try:
        result = RUNNERS[args.traffic](bed, view, args, fault)
    except RuntimeError as error:
        result = {"verified": False}
        fault.started.set()   # an injector still waiting for the traffic gives up
        tqdm.write("run %d: %s" % (number, error), file=sys.stderr)   # all of it, once
        failures.append(str(error).splitlines()[0])
    injector.join()
    usage = sampler.stop()
    fault.heal()
    wait_until(lambda: all(s["synced"] for s in bed.client.get("/fabric/topology")["switches"]),
               20, "every switch back")
    # the emulator kept up with the traffic the fault did not meet (a tree's: loss, and the
    # sender's backing off from it, are the fault's, so the CPU decides)
    kept_up = result.get("kept_up", lambda usage: fidelity.verdict(None, None, None, 0, usage))
    log = bed.controller_log()
    return {"traffic": args.traffic, "fault": args.fault, "repair": repair, "run": number,
            **{key: result.get(key) for key in MEASURED},
            "reconcile_changes": reconcile_changes(log, fault),
            "gap_at_s": gap_at_s(result, fault),
            **{key: fault.restart.get(key) for key in RESTART_PHASES},
            "repaired": repaired_in(log, args, fault, result),
            "verified": result["verified"], "leftovers": bed.leftovers(),
            "recovered_s": fault.recovered_s,
            "during_transfer": result.get("during_transfer", fault.recovered_s is None or (
                result.get("completion_s") is not None
                and fault.recovered_s < result["completion_s"])),
            "failed": "; ".join(failures), "link_mbps": args.bw, **kept_up(usage)}


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
                    print(json.dumps({k: row[k] for k in ("repair", *summarized(args),
                                                          "reconcile_changes", "repaired",
                                                          "verified", "leftovers")}),
                          flush=True)
                    rows.append(row)
    except (PlatformError, RuntimeError, ValueError) as error:
        sys.exit("error: %s" % error)
    write_csv([dict(row, leftovers=json.dumps(row["leftovers"])) for row in rows], args.out,
              COLUMNS)
    for repair in args.repair:
        for measure in summarized(args):
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


def summarized(args):
    """The measures each run prints and the summary gives medians of, by --traffic."""
    return SUMMARIZED.get(args.traffic, ("extra_s",))


def hurt(row):
    """Whether the fault met the traffic: a job's rounds ran while it lasted (a plan may
    wait for a restarted switch instead of moving: its reconciliation is the repair);
    otherwise the controller repaired what the fault broke, and (a tree's transfer) the
    transfer was still going when it was over."""
    if row["traffic"] in JOB_TRAFFIC:
        return bool(row["faulty_rounds"])
    return row["repaired"] and (row["traffic"] != "tree" or row["during_transfer"])


def why_unhurt(row):
    if row["traffic"] in JOB_TRAFFIC:
        return "no round of the job ran while the fault lasted"
    if not row["repaired"]:
        return "the controller repaired nothing"
    if row["completion_s"] is None:
        return "the transfer's end was not measured"
    return "the transfer ended after %.2f s, before the fault was over" % row["completion_s"]


if __name__ == "__main__":
    main()
