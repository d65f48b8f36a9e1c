"""experiments.train's job in streaming rounds (stream_round.py): no parameter phase.
Every worker keeps its own copy of the model; per round each computes the gradient of its
minibatch, the gradients go to the PS shards through the job's INA plan, each shard's sum
comes back on its tree fragment by fragment, and every worker takes the same SGD step
from the same sum (SwitchML's return). The shards and their rates are the round
planner's (syncfabric/decisions/round_planner.py): on dedicated hosts (`stream`) or in the workers'
own hosts (`stream-colocated`).
"""

import time

import numpy as np

from experiments.defaults import EMULATED_MAX_PSS
from experiments.traffic.gradients import round_fidelity
from experiments.traffic.stream_round import StreamReturn, stream_job
from experiments.traffic.training import TrainingCoordinator, drive_training
from mininet_topos.description import describe
from syncfabric.decisions import round_planner
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.hosts.gradient_wire import wire_mbit


class StreamTrainingCoordinator(TrainingCoordinator):
    """Training rounds as streaming rounds (a StreamReturn return phase, no parameter
    phase); the model's state is the first worker's (every worker holds the same, since
    they all take the same step from the same sum)."""

    workers_hold_model = True

    def train_round(self, plan, client, parameter_mode, sampler):
        number = self.rounds + 1
        started = time.perf_counter()
        for worker in self.workers:
            self.channels[worker].send({"phase": "compute", "round": number})
        losses = [self.channels[worker].receive()["loss"] for worker in self.workers]
        aggregating = time.perf_counter()
        sampling = sampler().start()
        gradients = self.run_round(plan)
        usage = sampling.stop()
        for worker in self.workers:
            self.channels[worker].send({"phase": "apply", "round": number})
        update_s = max(self.channels[worker].receive()["update_s"] for worker in self.workers)
        kept_up = round_fidelity(gradients, usage)
        # the round ends when the slowest worker has taken its step: compute, the sums
        # back, the update (not the reports and checks that follow, step 2 of stream_round)
        compute_s = aggregating - started
        return {**kept_up, "param_s": 0.0, "compute_s": compute_s,
                "aggregate_s": gradients["completed_s"], "update_s": update_s,
                "round_s": compute_s + gradients["completed_s"] + update_s,
                "loss": float(np.mean(losses)),
                "param_repair_passes": gradients["return_repair_passes"],
                "gradient_repair_passes": gradients["repair_passes"],
                "aggregators_used": sum(1 for received in gradients["aggregator_bytes"].values()
                                        if received)}

    def round_check(self, checks, finished):
        if not self.return_phase.returns_match(checks):
            raise RuntimeError("round %d: a worker's returned sum differs from its shard's PS's"
                               % self.rounds)
        return {"update_s": 0.0}

    def state_holder(self):
        return self.workers[0]


def run_stream_training(bed, workers, mode, setup, rounds, on_round=lambda _number: None,
                        timeout_s=120):
    """Train `rounds` streaming rounds on the plan the round planner makes for the
    testbed's fabric; returns run_training's rows (param_s is 0: both directions are in
    aggregate_s)."""
    view = FabricView(describe(bed.topo))
    candidates = [h for h in view.hosts if h not in workers]
    plan = round_planner.plan_round(view, workers, candidates, wire_mbit(setup.parameter_count),
                                    max_pss=EMULATED_MAX_PSS, colocated=mode == "stream-colocated")
    client = bed.client.retrying()
    with stream_job(client, workers, plan.pss, plan.return_mbps, setup.parameter_count,
                    "train-%s" % mode) as (report, groups):
        coordinator = StreamTrainingCoordinator(
            bed.management_ip, workers, plan.pss,
            sorted({a["aggregator"] for a in report["aggregates"]}),
            {name: bed.address(name) for name in workers}, setup, None, timeout_s,
            return_phase=StreamReturn(groups, plan.return_mbps))
        try:
            return drive_training(bed, coordinator, report, client, None, rounds, on_round,
                                  "training (%s)" % mode)
        finally:
            coordinator.listener.close()
