"""experiments.train's job as DistributedDataParallel runs it, on the job's hosts: every
worker computes the gradient of its minibatch, Gloo all-reduces the gradients, and every
worker applies the identical step to its own copy of the model.

    GLOO_SOCKET_IFNAME=h1-eth0 python -m syncfabric.hosts.training.gloo_training --name h1 \\
        --data-ip 10.0.0.1 --rank 0 --world 8 --master 10.0.0.1:29500 \\
        --setup '{"workers": 8, ...}' --rounds 30 --state-dir /tmp/job

The arithmetic is digits_mlp's, on one BLAS thread. Rank 0 writes its parameters and
momentum after every round to STATE_DIR/round-N.npz (the hosts share the file system),
and prints one JSON line per round: `round`, `compute_s`, `comm_s` and `round_s` (the
slowest rank's), and `loss` (the workers' mean). run_gloo_training runs it from the root
namespace and checks every round as experiments.train checks its own modes.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from syncfabric.hosts.training.digits_mlp import (TrainingSetup, dataset, initial_parameters,
                                         one_blas_thread, sgd_update, worker_gradient)
from syncfabric.hosts.training.gloo_peers import joined, rank_parser, slowest, timed


def state_path(state_dir, number):
    return Path(state_dir) / ("round-%d.npz" % number)


def run(args):
    setup = TrainingSetup(**json.loads(args.setup))
    data = dataset(setup.seed)
    parameters = initial_parameters(setup)
    velocity = np.zeros_like(parameters)
    with joined(args):
        for number in range(1, args.rounds + 1):
            dist.barrier()
            started = time.perf_counter()
            loss, gradient = worker_gradient(setup, parameters, data, args.rank, number)
            compute_s = time.perf_counter() - started
            tensor = torch.from_numpy(gradient)
            comm_s = timed(lambda: dist.all_reduce(tensor))
            parameters, velocity = sgd_update(setup, parameters, velocity, tensor.numpy())
            round_s = time.perf_counter() - started
            compute_s, _ = slowest(compute_s, True)
            comm_s, _ = slowest(comm_s, True)
            round_s, _ = slowest(round_s, True)
            losses = torch.tensor([loss], dtype=torch.float64)
            dist.all_reduce(losses)
            if args.rank == 0:
                np.savez(state_path(args.state_dir, number), parameters=parameters,
                         velocity=velocity)
                print(json.dumps({"round": number, "compute_s": compute_s, "comm_s": comm_s,
                                  "round_s": round_s, "loss": float(losses[0]) / args.world}),
                      flush=True)


def parse_args(argv):
    parser = rank_parser("gloo_training", __doc__, "the number of workers")
    parser.add_argument("--setup", required=True, help="the job, TrainingSetup.as_dict() as JSON")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--state-dir", required=True, help="where rank 0 writes each round's state")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    with one_blas_thread():   # the gradients bit for bit as the one-process reference's
        run(args)


if __name__ == "__main__":
    sys.exit(main())
