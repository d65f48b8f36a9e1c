"""experiments.train's job, run as users run it: a job (POST /jobs, docs/jobs.md) whose
workers each run syncfabric/hosts/training/job_training.py, the training loop of a user's
script. Every worker keeps its own copy of the model; per round each computes the
gradient of its minibatch, sums it with the others' through the fabric and takes the
same SGD step from the same sum. A round ends when its slowest worker has taken its
step; the first worker's model is checked after every round against one process
(round_check.RoundCheck).

Every mode is a job request (jobs.mode_job):
- the papers' modes, PARAMETERS+GRADIENTS (jobs.PAPERS_MODES): one PS on a host of its own,
  the gradients straight to it (`ps`) or summed in the network on the way (`ina`,
  GRID's plan), and the sums back by `unicast` (one copy per worker, each on its own
  path) or `multicast` (one reserved tree). The PS's link is counted at its switch;
- the streaming modes (defaults.STREAM_MODES): as many shards as the round planner
  decides, on dedicated hosts (`stream`) or in the workers' own (`stream-colocated`).
"""

import json
import tempfile
import time
from pathlib import Path

import numpy as np

from experiments.defaults import JOB_START_S
from experiments.traffic.jobs import (job_round_fidelity, program_lines, round_totals,
                                     served_job, start_program)
from experiments.traffic.round_check import RoundCheck
from syncfabric.hosts.training.digits_mlp import one_blas_thread

PROGRAM = "syncfabric.hosts.training.job_training"


def run_job_training(bed, request, setup, rounds, on_round=lambda _number: None,
                     rate_fraction=1.0, watched=None, timeout_s=120, on_started=None):
    """Train `rounds` rounds of the job `request` asks for; one row per round (param_s is
    0: both directions are in aggregate_s). rate_fraction: of its planned rates each
    worker sends at. watched: a host whose link's bytes per round, counted at its switch,
    each row carries (ps_downlink_mb, ps_uplink_mb); each carries the job's
    predicted_round_s too. on_started(job, start_at): the
    workers were started, their first round due at start_at (time.time())."""
    with served_job(bed, request) as job, \
            tempfile.TemporaryDirectory(prefix="syncfabric-states-") as states:
        start_at = time.time() + JOB_START_S
        sampling = bed.sampler().start()
        before = bed.switch_port_bytes(watched) if watched else None
        workers = workers_of(bed, job, setup, rounds, rate_fraction, start_at, states)
        if on_started is not None:
            on_started(job, start_at)
        lines = program_lines(workers, job, timeout_s + 10 * rounds)
        usage = sampling.stop()
        link = link_per_round(bed.switch_port_bytes(watched), before, rounds) if watched else {}
        with one_blas_thread():
            return [dict(row, predicted_round_s=job["predicted_round_s"], **link)
                    for row in training_rows(lines, setup, Path(states), start_at, usage,
                                             on_round, len(job["aggregators"]))]


def workers_of(bed, job, setup, rounds, rate_fraction, start_at, states):
    """The job's workers running job_training from start_at, the first keeping its states."""
    return start_program(bed, job, PROGRAM, [
        "--rounds", str(rounds), "--setup", json.dumps(setup.as_dict()),
        "--rate-fraction", repr(rate_fraction)], start_at, own={job["workers"][0]: [
            "--states", states]})


def link_per_round(after, before, rounds):
    """The watched link's MB per round each way from two (received, sent) readings of its
    switch port: what the switch received is the host's uplink."""
    return {"ps_uplink_mb": (after[0] - before[0]) / rounds / 1e6,
            "ps_downlink_mb": (after[1] - before[1]) / rounds / 1e6}


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
