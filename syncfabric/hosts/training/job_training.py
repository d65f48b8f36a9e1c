"""Data-parallel training through a job, as a user's training script runs it: every
worker holds the model, computes its minibatch's gradient (digits_mlp), sums it with
every other worker's through the fabric (FabricWorker.allreduce) and takes the same SGD
step from the same sum (SwitchML's return).

    python -m syncfabric.hosts.training.job_training --controller http://10.0.0.254:8080 --job 1 \\
        --name h1 --rounds 30 --setup '{"workers": 8}'

It prints a JSON line per round: its loss, how long the gradient, the sum and the step
took, when the round ended (wall clock, so that rounds compare across workers), and what
the sum took on the wire (FabricWorker.stats). With --states DIR it also writes each
round's parameters and momentum there (round-N.npy), for a check against one process.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

from syncfabric.hosts.cli import ArgumentParser, job_id_of, job_program_arguments, wait_until
from syncfabric.hosts.training.digits_mlp import (TrainingSetup, dataset, initial_parameters,
                                         one_blas_thread, sgd_update, worker_gradient)
from syncfabric.hosts.jobs.fabric_worker import FabricJob, FabricWorker
from syncfabric.hosts.jobs.job_layout import JobError


def parse_args(argv):
    parser = ArgumentParser(prog="python -m syncfabric.hosts.training.job_training",
                            description=__doc__.split("\n\n")[0])
    job_program_arguments(parser, rounds=30)
    parser.add_argument("--setup", type=json.loads, default={},
                        help="the TrainingSetup's fields as JSON (the same for every worker)")
    parser.add_argument("--states", type=Path, default=None,
                        help="a folder for each round's parameters and momentum")
    parser.add_argument("--rate-fraction", type=float, default=1.0,
                        help="the fraction of its planned rates this worker sends at "
                             "(default %(default)s)")
    args = parser.parse_args(argv)
    if not 0 < args.rate_fraction <= 1:
        parser.error("--rate-fraction must be in (0, 1]")
    return args


def train(args):
    setup = TrainingSetup(**args.setup)
    worker = FabricWorker(FabricJob.attach(args.controller, job_id_of(args)), args.name,
                          rate_fraction=args.rate_fraction)
    index = worker.layout.workers.index(args.name)
    parameters = initial_parameters(setup)
    velocity = np.zeros_like(parameters)
    data = dataset(setup.seed)
    try:
        worker.wait_served()   # its daemons and the other workers answer
        wait_until(args.start_at)
        for number in range(1, args.rounds + 1):
            started = time.perf_counter()
            loss, gradient = worker_gradient(setup, parameters, data, index, number)
            computed = time.perf_counter()
            total = worker.allreduce(gradient)
            summed = time.perf_counter()
            parameters, velocity = sgd_update(setup, parameters, velocity, total)
            if args.states is not None:
                np.save(args.states / ("round-%d.npy" % number), np.concatenate([parameters, velocity]))
            print(json.dumps(dict(worker.stats[number], round=number, loss=float(loss),
                                  compute_s=computed - started, aggregate_s=summed - computed,
                                  update_s=time.perf_counter() - summed, ended_at=time.time())),
                  flush=True)
    finally:
        worker.close()


def main(argv=None):
    args = parse_args(argv)
    try:
        with one_blas_thread():   # the gradients, bit for bit as one process computes them
            train(args)
    except JobError as error:
        print(json.dumps({"error": str(error)}), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
