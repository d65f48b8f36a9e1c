"""experiments.train's job in streaming rounds, run as users run it: a job (POST /jobs,
docs/jobs.md) whose workers each run syncfabric/hosts/job_training.py, the training
loop of a user's script. Every worker keeps its own copy of the model; per round each
computes the gradient of its minibatch, sums it with the others' through the fabric
(the gradients aggregated on the way to the PS shards, each shard's sum back on its
tree) and takes the same SGD step from the same sum. The shards are as many as the
round planner decides (syncfabric/decisions/round_planner.py), on dedicated hosts
(`stream`) or in the workers' own hosts (`stream-colocated`). A round ends when its
slowest worker has taken its step; the first worker's model is checked after every
round against one process (training.RoundCheck).
"""

import json
import tempfile
import time
from pathlib import Path

import numpy as np

from experiments.defaults import EMULATED_MAX_PSS, JOB_START_S, STREAM_PLACEMENT
from experiments.traffic.jobs import (job_round_fidelity, program_lines, round_totals,
                                     served_job, start_program, stream_job)
from experiments.traffic.training import RoundCheck
from mininet_topos.description import describe
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.hosts.digits_mlp import one_blas_thread

PROGRAM = "syncfabric.hosts.job_training"


def run_stream_training(bed, workers, mode, setup, rounds, on_round=lambda _number: None,
                        timeout_s=120):
    """Train `rounds` rounds of a job planned for the testbed's fabric; returns
    run_training's rows (param_s is 0: both directions are in aggregate_s)."""
    view = FabricView(describe(bed.topo))
    request = stream_job(view, workers, [h for h in view.hosts if h not in workers],
                         setup.parameter_count, EMULATED_MAX_PSS, STREAM_PLACEMENT[mode])
    with served_job(bed, request) as job, \
            tempfile.TemporaryDirectory(prefix="syncfabric-states-") as states:
        start_at = time.time() + JOB_START_S
        sampling = bed.sampler().start()
        lines = program_lines(start_program(
            bed, job, PROGRAM, ["--rounds", str(rounds), "--setup", json.dumps(setup.as_dict())],
            start_at,
            own={workers[0]: ["--states", states]}), job, timeout_s + 10 * rounds)
        usage = sampling.stop()
        with one_blas_thread():
            return training_rows(lines, setup, Path(states), start_at, usage, on_round,
                                 len(job["aggregators"]))


def training_rows(lines, setup, states, start_at, usage, on_round, aggregators):
    """One row per round over every worker: when the slowest ended, the slowest gradient
    and step, the rest of the round as its sum (aggregate_s), its fidelity, and the
    check of the first worker's model."""
    check, rows, previous = RoundCheck(setup), [], start_at
    for per_worker in zip(*lines.values()):
        number = per_worker[0]["round"]
        ended = max(r["ended_at"] for r in per_worker)
        state = np.load(states / ("round-%d.npy" % number))
        totals = round_totals(per_worker)
        kept_up = job_round_fidelity(totals, usage.during(previous, ended))
        slowest = {key: max(r[key] for r in per_worker) for key in ("compute_s", "update_s")}
        rows.append(dict(kept_up, round=number, param_s=0.0, elapsed_s=ended - start_at,
                         round_s=ended - previous, loss=float(np.mean([r["loss"] for r in per_worker])),
                         aggregate_s=max(0.0, ended - previous - sum(slowest.values())), **slowest,
                         param_repair_passes=0,
                         gradient_repair_passes=totals["repair_requests"],
                         aggregators_used=aggregators,
                         **check(number, np.split(state, 2))))
        previous = ended
        on_round(number)
    return rows
