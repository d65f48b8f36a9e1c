"""Gradient aggregation with real float32 gradients: workers, aggregators and a PS in
Mininet hosts, steered by an INA plan (apps/ina_controller.py).

Each host runs syncfabric/hosts/gradient_host.py and learns its role (worker,
aggregator or PS) from the coordinator here; the fragments and the exact sum are
gradient_wire.py's.

Every process connects to the coordinator (GradientCoordinator, run by the
experiment in the root namespace) over the management network. Per round:
1. the coordinator tells each process its part of the plan: a worker its legs
   (destination, fragment range, rate; a worker whose plan splits it sends the
   first part of its fragments to its aggregator and the rest to the PS), an
   aggregator which workers it sums for which fragments and where the
   aggregate goes, the PS how many workers;
2. on "go" every worker sends its seeded gradient as fragments (job, round,
   fragment id, fragment count and the set of workers the fragment carries,
   as a 64-bit mask), paced at each leg's planned rate;
3. an aggregator adds each fragment into the fragment's sum unless one of its
   workers is already in it (a late or repeated copy is never added twice),
   and when a fragment holds all the workers it expects, sends the aggregate
   with their set on to the PS; the PS adds what reaches it the same way;
4. repair: the PS and the aggregators report, per fragment, the workers still
   missing; an aggregator resends the aggregates it has, the workers resend
   what did not reach their aggregator or the PS, at a share of the planned
   rates that backs off on loss and probes back up (rate_control.py); until
   the PS holds every worker in every fragment, or the repair budget is spent;
5. the PS checks the sum against the exact one, computed in float64 from the
   same seeds: every element within the float32 summation bound
   n * 2**-24 * sum_i |g_i| (recursive summation, any order) plus one
   rounding of the result.
Capacities are enforced by the network: an aggregator's link is shaped to its
processing capacity C_s and the PS's to its ingress T (mininet_topos), and a
meter holds every stream to its planned rate.
"""

import socket
import sys
import time

from experiments import fidelity
from experiments.traffic.gradient_parts import RoundParts
from experiments.traffic.launch import run_in_hosts
from syncfabric.hosts.control_channel import accept_named
from syncfabric.hosts.gradient_wire import MAX_WORKERS, gradient_floats, wire_mbit
from syncfabric.hosts.rate_control import LossAdaptiveRate

COORDINATOR_PORT = 7200
REPAIR_BUDGET_S = 120.0   # a round still incomplete this long after "go" gives up
HOST_PROGRAM = "syncfabric.hosts.gradient_host"


class Replanned(Exception):
    """The controller planned a round's plan again (a fault) while the round was being
    repaired: the round starts again on `plan`, after `passes` repair passes."""

    def __init__(self, plan, passes):
        super().__init__("plan %s planned again" % plan.get("id"))
        self.plan, self.passes = plan, passes


class GradientCoordinator:
    """Runs rounds of a plan (the POST /ina/plans answer) over the processes. pss: the
    PS, or the PSs among which the plan splits the model (each holds a contiguous
    range of fragments, fragment_ranges)."""

    def __init__(self, listen_ip, workers, pss, aggregators, floats, seed=0,
                 rate_fraction=0.95, repair_budget_s=REPAIR_BUDGET_S, connect_timeout_s=60.0,
                 on_go=None, plan_now=None):
        if len(workers) > MAX_WORKERS:
            raise ValueError("at most %d workers (the worker mask has 64 bits)" % MAX_WORKERS)
        self.pss = [pss] if isinstance(pss, str) else list(pss)
        self.ps = self.pss[0]
        self.workers, self.aggregators = list(workers), list(aggregators)
        self.floats = floats
        self.seed = seed
        self.rate_fraction = rate_fraction
        self.repair_budget_s = repair_budget_s
        self.listener = socket.create_server((listen_ip, COORDINATOR_PORT))
        self.listener.settimeout(connect_timeout_s)
        self.channels = {}
        self.rounds = 0
        self.on_go = on_go   # on_go(round number): the workers were told to send
        self.plan_now = plan_now   # the plan as the controller reports it now, or None

    @property
    def names(self):
        """Every process once (a PS may also be a worker: one process, both parts)."""
        return list(dict.fromkeys([*self.workers, *self.aggregators, *self.pss]))

    def accept(self):
        self.channels = accept_named(self.listener, self.names)

    def run_round(self, plan):
        """One round; returns comm_time_s, repair passes, PS bytes, verified."""
        self.rounds += 1
        number = self.rounds
        parts = RoundParts.of(plan, self.workers, self.pss, self.aggregators, self.floats,
                              self.rate_fraction)
        common = {"job": plan["id"], "round": number, "ports": sorted(plan["ports"].values()),
                  "floats": self.floats, "seed": self.seed}
        for name, message in parts.messages(common).items():
            self.channels[name].send(message)
        self.expect(self.names, {"ready": number})
        started = time.perf_counter()
        for worker in self.workers:
            self.channels[worker].send({"go": number})
        if self.on_go is not None:
            self.on_go(number)
        self.expect(self.workers, {"sent": number})
        first_pass = {"first_pass_s": time.perf_counter() - started,
                      "planned_first_pass_s": parts.planned_first_pass_s()}
        try:
            passes, reports = self._repair_until_complete(plan, parts, number, started,
                                                          first_pass)
        except Replanned as moved:
            # its meters now hold other streams to other rates: the repairs of this
            # plan's streams would crawl. The round starts again on the new plan
            for name in self.names:
                self.channels[name].send({"done": number})
            result = self.run_round(moved.plan)
            return dict(result, comm_time_s=time.perf_counter() - started, **first_pass,
                        repair_passes=moved.passes + result["repair_passes"], restarted=True)
        comm_time_s = time.perf_counter() - started
        check = self._check(number)
        return {"comm_time_s": comm_time_s, "repair_passes": passes, "restarted": False,
                **first_pass,
                "ps_bytes": sum(reports[ps]["received_bytes"] for ps in self.pss),
                "aggregator_bytes": {a: reports[a]["received_bytes"] for a in self.aggregators},
                **check}

    def _repair_until_complete(self, plan, parts, number, started, first_pass):
        """Ask the aggregators and PSs what they miss and have it sent again, until the
        PSs miss nothing; (repair passes, the last reports). Adds the first pass's loss
        to `first_pass`. Replanned if the controller planned the plan again meanwhile;
        RuntimeError once the repair budget is spent."""
        passes, sent = 0, parts.fragments
        scale = LossAdaptiveRate(1.0)   # of every stream's planned rate, for repairs
        while True:
            reports = self._reports([*self.aggregators, *self.pss], number)
            lost = sum(bin(mask).count("1") for ps in self.pss
                       for _f, mask in reports[ps]["missing"])
            if "first_pass_loss" not in first_pass:
                first_pass.update(first_pass_loss=lost / sent, lost_fragments=lost)
            if not lost:
                return passes, reports
            passes += 1
            if time.perf_counter() - started > self.repair_budget_s:
                raise RuntimeError(
                    "round %d: after %.0f s of repair (%d passes), %d worker fragments still "
                    "miss the PS (first: %s); repairs were sent at %.0f%% of the planned rates "
                    "and kept being lost, so the platform is not carrying the plan (see `make "
                    "calibrate`, use a lower --bw)" % (number, self.repair_budget_s, passes, lost, {
                        name: reports[name]["missing"][:3] for name in reports
                        if reports[name]["missing"]}, 100 * scale.lowest))
            replanned = self._replanned(plan)
            if replanned is not None:
                raise Replanned(replanned, passes)
            scale.update(min(1.0, lost / sent), time.perf_counter())
            resend = parts.repairs(reports, scale.rate)
            sent = sum(last - first for items in resend.values() for item in items
                       for first, last in item["fragments"])
            for name, items in resend.items():
                self.channels[name].send({"resend": items})
            self.expect(list(resend), {"sent": number})

    def _check(self, number):
        """Every PS's check of its sum (round_check), then the round is done everywhere."""
        checks = {}
        for ps in self.pss:
            self.channels[ps].send({"sum": number})
            checks[ps] = self.channels[ps].receive()
        for name in self.names:
            self.channels[name].send({"done": number})
        return round_check(checks)

    def _replanned(self, plan):
        """The plan the controller reports now if it planned the round's plan again with
        other nodes or rates (a fault); None if it did not, or only moved its paths."""
        now = self.plan_now() if self.plan_now is not None else plan
        if now.get("revision", 0) == plan.get("revision", 0):
            return None

        def assignment(report):
            return {w: [(leg["node"], leg["share"], leg["rate_mbps"]) for leg in legs]
                    for w, legs in report["workers"].items()}
        return None if assignment(now) == assignment(plan) else now

    def _reports(self, names, number):
        for name in names:
            self.channels[name].send({"report": number})
        return {name: self.channels[name].receive() for name in names}

    def expect(self, names, reply):
        for name in names:
            answer = self.channels[name].receive()
            if answer != reply:
                raise RuntimeError("%s answered %r, expected %r" % (name, answer, reply))

    def close(self):
        for channel in self.channels.values():
            channel.send({"bye": True})
            channel.sock.close()
        self.listener.close()


def round_check(checks):
    """The round's verdict from every PS's answer to "sum" ({PS: answer}; one PS's
    answer is the verdict as it is)."""
    answers = list(checks.values())
    return answers[0] if len(answers) == 1 else {
        "verified": all(c["verified"] for c in answers),
        "error_to_bound": max(c["error_to_bound"] for c in answers)}


def run_gradient_rounds(bed, plan, rounds, gradient_mb=None, seed=0, rate_fraction=0.95,
                        timeout_s=120, on_go=None, aggregators=None, follow=False, floats=None,
                        on_round=lambda _number: None):
    """Start the processes of `plan` in their hosts, run `rounds` rounds, stop them;
    returns per-round results. RuntimeError with the processes' output if anything fails.
    The gradient: gradient_mb megabytes, or `floats` float32. on_go(round number) runs
    as each round's workers start sending, on_round(round number) after it. follow:
    each round after the first reads the plan again, and runs on it if the controller
    moved it around a fault (aggregators: every host it may then use, to run a process
    in)."""
    used = {a["aggregator"] for a in plan["aggregates"]}
    aggregators = sorted(used | set(aggregators or ()))
    workers = list(plan["workers"])
    coordinator = GradientCoordinator(
        bed.management_ip, workers, list(plan["ports"]), aggregators,
        floats or gradient_floats(gradient_mb), seed, rate_fraction,
        connect_timeout_s=timeout_s, on_go=on_go,
        plan_now=(lambda: bed.client.retrying().get("/ina/plans/%d" % plan["id"])) if follow
        else None)
    command = [sys.executable, "-m", HOST_PROGRAM,
               "--coordinator", "%s:%d" % (bed.management_ip, COORDINATOR_PORT)]

    def drive():
        coordinator.accept()
        results, current = [], plan
        for number in range(rounds):
            if follow and number:
                current = coordinator.plan_now()
                missing = {a["aggregator"] for a in current["aggregates"]} - set(aggregators)
                if missing:
                    raise RuntimeError("plan %d moved to aggregator(s) %s, which run no process "
                                       "(pass them as aggregators)" % (plan["id"], ", ".join(missing)))
            results.append(dict(coordinator.run_round(current),
                                plan_revision=current.get("revision", 0)))
            on_round(number + 1)
        coordinator.close()
        return results
    try:
        return run_in_hosts(bed, coordinator.names, command, drive, "gradient rounds")
    finally:
        coordinator.listener.close()


def round_fidelity(result, usage):
    """Whether the emulator kept up with a round (fidelity.verdict): its workers' first
    pass against the time the plan's rates give it, and what the PS (and, in a
    streaming round, the workers the sums came back to) missed after it."""
    return fidelity.verdict(1.0, result["planned_first_pass_s"] / result["first_pass_s"],
                            max(result["first_pass_loss"],
                                result.get("return_first_pass_loss", 0.0)),
                            result["lost_fragments"], usage)


def run_plan(bed, request, rounds, gradient_mb, on_go=None, follow=False):
    """Ask for a plan (`request`: the POST /ina/plans body without gradient_mb; the
    controller is given the gradient's size on the wire, headers included, so its
    predicted time is what the links carry), run `rounds` rounds on it, remove it.
    Returns the plan and the rounds' results, each with min_rate_mbps: one worker's
    gradient on the wire over the communication time. on_go and follow: as in
    run_gradient_rounds (follow runs a process in every aggregator the request names)."""
    gradient_mbit = wire_mbit(gradient_floats(gradient_mb))
    client = bed.client.retrying()   # the job rides out a controller restart
    plan = client.request("POST", "/ina/plans", dict(request, gradient_mb=gradient_mbit / 8))
    try:
        results = run_gradient_rounds(bed, plan, rounds, gradient_mb, on_go=on_go,
                                      aggregators=request.get("aggregators") if follow else None,
                                      follow=follow)
    finally:
        client.request("DELETE", "/ina/plans/%d" % plan["id"])
    for result in results:
        result["min_rate_mbps"] = gradient_mbit / result["comm_time_s"]
    return plan, results
