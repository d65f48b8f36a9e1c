"""Jobs (POST /jobs) run on a testbed's hosts the way users run them: the aggregator
daemon (python -m syncfabric.aggregator) on every aggregator host and every host that may
hold a PS shard, and each worker a process calling the library (job_worker)."""

import json
import subprocess
import sys
from contextlib import contextmanager

DAEMON = [sys.executable, "-m", "syncfabric.aggregator"]
WORKER = [sys.executable, "-m", "syncfabric.hosts.job_worker"]


@contextmanager
def job_daemons(bed, hosts):
    """The daemon running in each of `hosts` (by name) while the block runs; yields
    {host: Popen}. Afterwards each is stopped (SIGTERM) and its log kept in .log."""
    daemons = {host: bed.popen(host, DAEMON + ["--controller", bed.management_url, "--name", host],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for host in hosts}
    try:
        yield daemons
    finally:
        for daemon in daemons.values():
            daemon.terminate()
        for daemon in daemons.values():
            try:
                daemon.log = daemon.communicate(timeout=10)[0]
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.log = daemon.communicate()[0]


def start_workers(bed, job, rounds, in_flight=1, seed=0):
    """Each worker of `job` (the POST /jobs answer) running `rounds` rounds; {worker: Popen}."""
    return {worker: bed.popen(worker, WORKER + [
        "--controller", bed.management_url, "--job", str(job["id"]), "--name", worker,
        "--rounds", str(rounds), "--in-flight", str(in_flight), "--seed", str(seed)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for worker in job["workers"]}


def worker_lines(process, timeout_s=120):
    """The JSON lines a job_worker printed, once it ended (RuntimeError with its output if
    it printed something else or did not end in time)."""
    try:
        output, errors = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        output, errors = process.communicate()
        raise RuntimeError("a worker did not end in %d s: %s" % (timeout_s, (output + errors)[-800:]))
    try:
        return [json.loads(line) for line in output.splitlines() if line.strip()]
    except ValueError:
        raise RuntimeError("a worker failed: %s" % (output + errors)[-800:]) from None


def run_job(bed, job, rounds, in_flight=1, seed=0, timeout_s=120):
    """Run `rounds` rounds of `job` on every worker; {worker: its per-round lines}, each
    {"round", "seconds", "exact"}. RuntimeError if a worker failed."""
    lines = {w: worker_lines(p, timeout_s)
             for w, p in start_workers(bed, job, rounds, in_flight, seed).items()}
    failed = {w: l[-1] for w, l in lines.items() if not l or "error" in l[-1]}
    if failed:
        raise RuntimeError("job %d: %s" % (job["id"], failed))
    return {w: l[:-1] for w, l in lines.items()}
