"""Rounds of a job from one worker, with whole-number gradients whose sums are exact in
float32, each checked bit for bit: a job's smoke test on any host.

    python -m syncfabric.hosts.jobs.job_worker --controller http://10.0.0.254:8080 --job 1 \\
        --name h1 --rounds 5

Every worker of the job runs it with the same --seed and --rounds. It prints a JSON line
per round ({"round", "started_at" (time.time()), "seconds", "exact"} and what the round
took: datagrams "sent" and "resent", "repair_requests", "first_pass_s" and
"planned_first_pass_s", the "generation" of the job's rates its first pass went at (the
oldest, if it spanned two), and for a job that borrows, the first pass's datagrams sent
"borrowed" and of them "borrowed_lost", and the job's window it started in under
interleaving, "period_s" and "phase_offset_s", else null), once every round is over, and
a last one with the summary;
its exit status is 1 if a round failed or a sum was not exact.
"""

import hashlib
import json
import sys
import time

import numpy as np

from syncfabric.hosts.cli import ArgumentParser, job_id_of, job_program_arguments, wait_until
from syncfabric.hosts.jobs.fabric_worker import FabricJob, FabricWorker
from syncfabric.hosts.jobs.job_layout import JobError
from syncfabric.hosts.transport.pacing import perf_counter_at

MAGNITUDE = 8   # |values| < 8: a sum over 64 workers stays a whole number below 2**24
# how long before its scheduled start (--every) a round is handed to the worker, which
# makes its datagrams then: made at the start, 32 workers' making took the 2 cores for
# 40-60 ms, and so many milliseconds set their first datagrams apart
MADE_AHEAD_S = 0.1


def whole_gradient(seed, worker, number, floats):
    """Worker `worker`'s values in round `number`: whole numbers in -7..7, as float32."""
    rng = np.random.default_rng([seed, worker, number])
    return rng.integers(1 - MAGNITUDE, MAGNITUDE, floats).astype(np.float32)


def parse_args(argv):
    parser = ArgumentParser(prog="python -m syncfabric.hosts.jobs.job_worker",
                            description=__doc__.split("\n\n")[0])
    job_program_arguments(parser, rounds=1)
    parser.add_argument("--in-flight", type=int, default=1,
                        help="rounds started before the first is waited for (default 1)")
    parser.add_argument("--every", type=float, default=None, metavar="SECONDS",
                        help="start round k at --start-at + (k-1) x SECONDS (or when round k-1 "
                             "is back, if later), so that every worker starts each round "
                             "together, as ranks leave a barrier; its datagrams are made "
                             "%g s before (default: back to back)" % MADE_AHEAD_S)
    parser.add_argument("--compute-s", type=float, default=0.0, metavar="SECONDS",
                        help="wait this long after each round's sum is back before the next, "
                             "standing in for a training step's compute (default 0)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.every is not None and (args.start_at is None or args.in_flight != 1 or args.every <= 0):
        parser.error("--every needs --start-at, --in-flight 1 and a positive number of seconds")
    if args.compute_s < 0 or (args.compute_s and (args.in_flight != 1 or args.every)):
        parser.error("--compute-s must be 0 or more, with --in-flight 1 and no --every")
    return args


def slot(args, number):
    """When round `number` starts on --every's schedule (None: back to back)."""
    return None if args.every is None else args.start_at + (number - 1) * args.every


def round_start(args, worker, number):
    """When round `number` starts: on --every's schedule, else at the job's next window
    when the fabric interleaves jobs (phase_windows.py), else at once (None)."""
    return slot(args, number) if args.every is not None else worker.next_window()


def run(args):
    """The rounds back to back (--in-flight at once) or, with --every or the job's windows
    (round_start), each at its time on a schedule every worker shares (handed over
    MADE_AHEAD_S before it); each timed from
    its start (the scheduled one, or later if the round before was late) until its sum is
    back. Every round's gradient is made before the first round and every sum checked
    after the last (this program holds them all; with --every, in the slot after the
    last round, or the first workers' checks slow the others' last round): made or
    checked between rounds, each worker's own work delayed the next round's start, each
    by as much as the 2 cores gave it (0.16 s of a 0.74 s round with 16 workers at 25
    Mbit/s), where Gloo's rounds start together from a barrier."""
    job = FabricJob.attach(args.controller, job_id_of(args))
    worker = FabricWorker(job, args.name)
    workers, floats = worker.layout.workers, worker.layout.floats
    gradients = {number: whole_gradient(args.seed, workers.index(args.name), number, floats)
                 for number in range(1, args.rounds + 1)}
    timed, totals, pending = [], {}, []
    try:
        worker.wait_served()   # its daemons and the other workers answer
        if args.every is None:
            wait_until(args.start_at)
        for number, values in gradients.items():
            if number > 1:
                time.sleep(args.compute_s)   # the step's compute, once the sum is back
            due = round_start(args, worker, number)
            if due is not None:
                wait_until(due - MADE_AHEAD_S)
            pending.append((number, perf_counter_at(due), max(due or 0.0, time.time()),
                            worker.planned_window(),
                            worker.allreduce_async(values, start_at=due)))
            if len(pending) >= args.in_flight or number == args.rounds:
                for done, started, started_at, window, future in pending:
                    totals[done] = future.result()
                    timed.append(dict(worker.stats[done], round=done, started_at=started_at,
                                      seconds=time.perf_counter() - started,
                                      period_s=window and window.period_s,
                                      phase_offset_s=window and window.phase_offset_s))
                pending = []
        wait_until(slot(args, args.rounds + 1))   # not while the others' last round runs
    finally:
        worker.close()
    results = []
    for result in timed:
        expected = sum(whole_gradient(args.seed, i, result["round"], floats)
                       for i in range(len(workers)))
        results.append(dict(result, exact=digest(totals[result["round"]]) == digest(expected),
                            datapath=worker.path.name))
        print(json.dumps(results[-1]), flush=True)
    return results


def digest(values):
    """float32 values' bits, hashed (+0.0 for -0.0): equal iff the arrays are."""
    return hashlib.sha256((values + np.float32(0)).astype(np.float32).tobytes()).digest()


def main(argv=None):
    args = parse_args(argv)
    try:
        results = run(args)
    except JobError as error:
        print(json.dumps({"error": str(error)}), flush=True)
        return 1
    seconds = sorted(r["seconds"] for r in results)
    exact = all(r["exact"] for r in results)
    print(json.dumps({"rounds": len(results), "exact": exact,
                      "p50_s": seconds[len(seconds) // 2]}), flush=True)
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
