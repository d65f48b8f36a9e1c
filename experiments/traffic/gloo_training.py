"""experiments.train's job as DistributedDataParallel runs it, in a testbed: the ranks of
syncfabric/hosts/training/gloo_training.py in the workers' hosts, and every round checked against
the one-process reference as experiments.train checks its own modes."""

import json
import tempfile

import numpy as np

from experiments import fidelity
from experiments.traffic.gloo_peers import run_ranks
from experiments.traffic.round_check import RoundCheck
from syncfabric.hosts.training.digits_mlp import one_blas_thread
from syncfabric.hosts.training.gloo_training import state_path


def run_gloo_training(bed, workers, setup, rounds, on_round=lambda _number: None):
    """Train `rounds` rounds as DDP does, in the workers' hosts; returns run_job_training's rows
    (param_s is 0: the all-reduce is aggregate_s), each round checked after the run."""
    with tempfile.TemporaryDirectory(prefix="syncfabric-gloo-") as state_dir:
        sampling = bed.sampler().start()
        rows = run_ranks(bed, list(workers), "syncfabric.hosts.training.gloo_training",
                         ["--setup", json.dumps(setup.as_dict()), "--rounds", str(rounds),
                          "--state-dir", state_dir], on_row=lambda row: on_round(row["round"]))
        kept_up = fidelity.verdict(None, None, None, 0, sampling.stop())
        check, results, elapsed = RoundCheck(setup), [], 0.0
        with one_blas_thread():
            for row in rows:
                with np.load(state_path(state_dir, row["round"])) as saved:
                    state = (saved["parameters"], saved["velocity"])
                elapsed += row["round_s"]
                results.append(dict(
                    kept_up, round=row["round"], param_s=0.0, compute_s=row["compute_s"],
                    aggregate_s=row["comm_s"],
                    update_s=row["round_s"] - row["compute_s"] - row["comm_s"],
                    round_s=row["round_s"], elapsed_s=elapsed, loss=row["loss"],
                    param_repair_passes=0, gradient_repair_passes=0, aggregators_used=0,
                    **check(row["round"], state)))
    return results
