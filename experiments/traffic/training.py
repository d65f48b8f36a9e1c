"""Synchronous data-parallel training over the fabric: a PS, workers and (with INA)
aggregators in Mininet hosts, driven round by round by a coordinator in the root
namespace. The hosts run syncfabric/hosts/training_host.py; the arithmetic is
syncfabric/hosts/digits_mlp.py.

A mode is PARAMETERS+GRADIENTS. Per round:
1. parameters: the PS sends its parameters (the float32 bytes) as numbered UDP
   chunks paced at the rate: once, to a path-aware multicast tree reserved for
   the round (`multicast`), or as one stream per worker sharing that rate
   (`unicast`); the workers report missing chunks and the PS sends them again
   until every worker holds them and their SHA-256 matches;
2. compute: each worker computes the gradient of its seeded minibatch at the
   parameters it received;
3. gradients: the gradients move through the job's INA plan, as in
   experiments/traffic/gradients.py: policy no-ina (`ps`: every worker straight
   to the PS) or grid (`ina`: through aggregator hosts); the PS adds them and
   applies the SGD step.
The coordinator times the phases and, after every round (untimed), checks
the PS's parameters and momentum against the same round computed in one
process from the PS's previous state (digits_mlp.reference_step, with the
workers' BLAS settings, gradients added in worker order): |x - x_ref| <=
ATOL + RTOL |x_ref| for every element. The two differ only in the order in
which the network adds the gradients in float32 (about 1e-7 here, 1% of the
tolerance). It also runs the whole job in one process from the start
(digits_mlp.ReferenceRun) and reports that run's test accuracy and the
largest parameter difference from it (drift). Drift has no fixed bound: once
a rounding difference flips a ReLU for one sample, the two runs take
different, equally valid steps (seen here: under 1e-7 for 16 rounds, then
4e-4 by round 30); the test accuracy stayed the same.
"""

import base64
import sys
import time

import numpy as np

from experiments import fidelity
from experiments.traffic.gradients import COORDINATOR_PORT, GradientCoordinator
from experiments.traffic.launch import run_in_hosts
from syncfabric.hosts.digits_mlp import (ReferenceRun, accuracy, initial_parameters,
                                         one_blas_thread, reference_step)
from syncfabric.hosts.gradient_wire import wire_mbit
from syncfabric.hosts.rate_control import LossAdaptiveRate
from syncfabric.hosts.wire import chunk_count, expand, ranges, wire_bytes

PARAMETER_MODES = ("unicast", "multicast")
GRADIENT_POLICIES = {"ps": "no-ina", "ina": "grid"}
MODES = tuple("%s+%s" % (p, g) for p in PARAMETER_MODES for g in GRADIENT_POLICIES)
ATOL, RTOL = 1e-6, 1e-4
PARAMETER_REPAIR_BUDGET_S = 120.0   # a parameter round still incomplete this long gives up


class TrainingCoordinator(GradientCoordinator):
    """Runs training rounds: parameters, compute, gradients (GradientCoordinator.run_round)."""

    def __init__(self, listen_ip, workers, ps, aggregators, addresses, setup, rate_mbps,
                 connect_timeout_s=60.0, plan_now=None, **options):
        super().__init__(listen_ip, workers, ps, aggregators, setup.parameter_count, setup.seed,
                         connect_timeout_s=connect_timeout_s, plan_now=plan_now, **options)
        self.addresses, self.setup, self.rate_mbps = addresses, setup, rate_mbps

    def prepare(self):
        """Tell every process the job and its role; returns once all have loaded."""
        roles = {**{a: "aggregator" for a in self.aggregators}, **{p: "ps" for p in self.pss},
                 **{w: "worker" for w in self.workers}}   # a co-located PS is a worker here
        for name in self.names:
            self.channels[name].send({"phase": "setup", "setup": self.setup.as_dict(),
                                      "role": roles[name], "index": self.workers.index(name)
                                      if name in self.workers else None})
        self.expect(self.names, {"ready": "setup"})

    def train_round(self, plan, client, parameter_mode, sampler):
        """One round; returns the phases' wall times, the workers' mean loss, the repairs,
        how many aggregators received gradients, and whether the emulator kept up while
        parameters and gradients moved (sampler() starts a fidelity.PlatformSampler;
        the compute phase is left out: it is the CPU's by design)."""
        number = self.rounds + 1
        started = time.perf_counter()
        sampling = sampler().start()
        if parameter_mode == "multicast":
            tree = client.request("POST", "/multicast/trees", {
                "source": self.ps, "receivers": self.workers, "policy": "path-aware",
                "bandwidth_mbps": self.rate_mbps, "ttl_s": 300})
            try:
                parameter_repairs, parameters = self.distribute_parameters(number, tree["address"])
            finally:
                client.request("DELETE", "/multicast/trees/%d" % tree["id"])
        else:
            parameter_repairs, parameters = self.distribute_parameters(number, None)
        usages = [sampling.stop()]
        computing = time.perf_counter()
        for worker in self.workers:
            self.channels[worker].send({"phase": "compute", "round": number})
        losses = [self.channels[worker].receive()["loss"] for worker in self.workers]
        aggregating = time.perf_counter()
        sampling = sampler().start()
        gradients = self.run_round(plan)
        usages.append(sampling.stop())
        ended = time.perf_counter()
        kept_up = fidelity.verdict(
            1.0, min(parameters["planned_s"] / parameters["first_pass_s"],
                     gradients["planned_first_pass_s"] / gradients["first_pass_s"]),
            max(parameters["first_pass_loss"], gradients["first_pass_loss"]),
            parameters["lost_chunks"] + gradients["lost_fragments"], fidelity.Usage.worst(usages))
        return {**kept_up, "param_s": computing - started, "compute_s": aggregating - computing,
                "aggregate_s": ended - aggregating - gradients["update_s"],
                "update_s": gradients["update_s"], "round_s": ended - started,
                "loss": float(np.mean(losses)), "param_repair_passes": parameter_repairs,
                "gradient_repair_passes": gradients["repair_passes"],
                "aggregators_used": sum(1 for received in gradients["aggregator_bytes"].values()
                                        if received)}

    def distribute_parameters(self, number, group):
        """The PS's parameters to every worker: to the tree's `group` address, or with
        group None one unicast stream per worker; returns the repair passes it took and
        its first pass (time, planned time, loss, chunks lost)."""
        ps = self.channels[self.ps]
        ps.send({"phase": "parameters", "round": number})
        announced = ps.receive()
        for worker in self.workers:
            self.channels[worker].send({"phase": "parameters", "round": number, "group": group,
                                        "size": announced["size"], "sha256": announced["sha256"]})
        self.expect(self.workers, {"ready": number})
        chunks_total = chunk_count(announced["size"])
        missing = {w: [[0, chunks_total]] for w in self.workers}
        copies = 1 if group else len(self.workers)
        first_pass = {"planned_s": wire_bytes(announced["size"]) * copies * 8 / 1e6 / self.rate_mbps}
        passes, started = 0, time.perf_counter()
        rate = LossAdaptiveRate(self.rate_mbps)   # backs off on loss, probes back up
        while True:
            union = sorted({i for chunks in missing.values() for i in expand(chunks)})
            if group:
                streams = [{"ip": group, "chunks": ranges(union), "rate_mbps": rate.rate}]
            else:
                streams = [{"ip": self.addresses[w], "chunks": chunks,
                            "rate_mbps": rate.rate / len(missing)}
                           for w, chunks in missing.items()]
            ps.send({"send": streams})
            self.expect([self.ps], {"sent": number})
            first_pass.setdefault("first_pass_s", time.perf_counter() - started)
            for worker in self.workers:
                self.channels[worker].send({"report": number})
            reports = {w: self.channels[w].receive() for w in self.workers}
            missing = {w: r["missing"] for w, r in reports.items() if r["missing"]}
            if "lost_chunks" not in first_pass:
                lost = sum(len(expand(chunks)) for chunks in missing.values())
                first_pass.update(lost_chunks=lost,
                                  first_pass_loss=lost / (chunks_total * len(self.workers)))
            if not missing:
                break
            passes += 1
            if time.perf_counter() - started > PARAMETER_REPAIR_BUDGET_S:
                raise RuntimeError(
                    "round %d: %s still miss parameters after %.0f s of repair (%d passes) at "
                    "down to %.2f Mbit/s: the platform is not carrying the tree (see `make "
                    "calibrate`, use a lower --bw)" % (number, ", ".join(sorted(missing)),
                                                      PARAMETER_REPAIR_BUDGET_S, passes, rate.lowest))
            rate.update(max(len(expand(chunks)) for chunks in missing.values()) / len(union),
                        time.perf_counter())
        for name in [self.ps, *self.workers]:
            self.channels[name].send({"done": number})
        if not all(r["sha256_ok"] for r in reports.values()):
            raise RuntimeError("round %d: a worker's parameters do not match the PS's SHA-256"
                               % number)
        return passes, first_pass

    def state_holder(self):
        """The process whose model is the job's: the PS."""
        return self.ps

    def ps_state(self):
        """The job's (parameters, velocity), over the management network."""
        holder = self.channels[self.state_holder()]
        holder.send({"phase": "report_state"})
        state = holder.receive()
        return tuple(np.frombuffer(base64.b64decode(state[name]), dtype=np.float32)
                     for name in ("parameters", "velocity"))


def error_to_tolerance(values, reference):
    """max over elements of |x - x_ref| / (ATOL + RTOL |x_ref|); the check is <= 1."""
    return float(np.max(np.abs(values - reference) / (ATOL + RTOL * np.abs(reference))))


class RoundCheck:
    """After each round (untimed): the job's state against the same round computed in one
    process from its previous state, and against the whole job run in one process
    (module doc)."""

    def __init__(self, setup):
        self.setup = setup
        self.reference = ReferenceRun(setup)
        self.state = (initial_parameters(setup), np.zeros(setup.parameter_count, dtype=np.float32))

    def __call__(self, number, state):
        """The check's columns for round `number`, whose result is `state` (params, velocity)."""
        data = self.reference.data
        _loss, *expected = reference_step(self.setup, data, *self.state, number)
        self.state = state
        ratio = max(error_to_tolerance(got, want) for got, want in zip(state, expected))
        return {"reference_loss": self.reference.step(),
                "test_accuracy": accuracy(self.setup, state[0], data[2], data[3]),
                "reference_accuracy": self.reference.test_accuracy(), "error_to_tolerance": ratio,
                "verified": ratio <= 1.0,
                "drift": float(np.max(np.abs(state[0] - self.reference.parameters)))}


def run_training(bed, ps, workers, mode, setup, rounds, rate_mbps,
                 on_round=lambda _number: None, timeout_s=120, aggregators=None):
    """Train `rounds` rounds in `mode` on the testbed (a fresh model, the job's INA plan
    posted before and removed after); returns one dict per round with the phases'
    times, loss, test accuracy of the PS's model and of the one-process run, the
    per-round check (error_to_tolerance, verified) and the drift. on_round(number)
    runs after each round. aggregators: every host a plan moved around a fault may
    use; then each round reads the job's plan again and runs on the one the
    controller reports (gradients.GradientCoordinator)."""
    parameter_mode, gradient_mode = mode.split("+")
    client = bed.client.retrying()   # the job rides out a controller restart
    plan = client.request("POST", "/ina/plans", {
        "job": "train-%s" % mode, "workers": workers, "ps": ps,
        "policy": GRADIENT_POLICIES[gradient_mode],
        "gradient_mb": wire_mbit(setup.parameter_count) / 8})
    coordinator = None
    try:
        coordinator = TrainingCoordinator(
            bed.management_ip, workers, ps,
            sorted({a["aggregator"] for a in plan["aggregates"]} | set(aggregators or ())),
            {name: bed.address(name) for name in workers}, setup, rate_mbps, timeout_s,
            plan_now=(lambda: client.get("/ina/plans/%d" % plan["id"])) if aggregators
            else None)
        return drive_training(bed, coordinator, plan, client, parameter_mode, rounds, on_round,
                              "training (%s)" % mode)
    finally:
        if coordinator is not None:
            coordinator.listener.close()
        client.request("DELETE", "/ina/plans/%d" % plan["id"])


def drive_training(bed, coordinator, plan, client, parameter_mode, rounds, on_round, what):
    """Run the job's processes in their hosts and `rounds` rounds of it, each checked
    (RoundCheck); with the coordinator's plan_now, each round after the first runs on
    the plan the controller reports then."""
    check = RoundCheck(coordinator.setup)
    command = [sys.executable, "-m", "syncfabric.hosts.training_host",
               "--coordinator", "%s:%d" % (bed.management_ip, COORDINATOR_PORT)]

    def train():
        coordinator.accept()
        coordinator.prepare()
        results, elapsed, current = [], 0.0, plan
        for number in range(1, rounds + 1):
            if coordinator.plan_now is not None and number > 1:
                current = coordinator.plan_now()
            result = coordinator.train_round(current, client, parameter_mode, bed.sampler)
            elapsed += result["round_s"]
            results.append(dict(result, round=number, elapsed_s=elapsed,
                                **check(number, coordinator.ps_state())))
            on_round(number)
        coordinator.close()
        return results

    def drive():
        with one_blas_thread():   # the workers' gradients, bit for bit
            return train()
    return run_in_hosts(bed, coordinator.names, command, drive, what)
