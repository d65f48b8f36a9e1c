"""Jobs (POST /jobs) run on a testbed's hosts the way users run them: the aggregator
daemon (python -m syncfabric.aggregator) on every aggregator host and every host that may
hold a PS shard, and each worker a process calling the library (job_worker)."""

import json
import os
import select
import subprocess
import sys
import time
from contextlib import contextmanager

from tqdm import tqdm

from experiments import fidelity
from experiments.defaults import STREAM_PLACEMENT
from experiments.platform_capacity import NotCalibrated, fitting_rate
from syncfabric.decisions import round_planner
from syncfabric.hosts.packets.gradient_wire import wire_mbit
from syncfabric.hosts.packets.wire import data_mtu

DAEMON = [sys.executable, "-m", "syncfabric.aggregator"]
WORKER_PROGRAM = "syncfabric.hosts.jobs.job_worker"
# the papers' modes, PARAMETERS+GRADIENTS: how the sums return, where the gradients sum
PAPERS_MODES = tuple("%s+%s" % (returns, gradients) for returns in ("unicast", "multicast")
                     for gradients in ("ps", "ina"))


@contextmanager
def job_daemons(bed, hosts):
    """The daemon running in each of `hosts` (by name) while the block runs; yields
    {host: Popen}. Afterwards each is stopped (SIGTERM) and its log kept in .log
    (with what output_so_far read of it before)."""
    daemons = {host: bed.popen(host, DAEMON + ["--controller", bed.management_url, "--name", host],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for host in hosts}
    for daemon in daemons.values():
        daemon.read_so_far = ""
    try:
        yield daemons
    finally:
        for daemon in daemons.values():
            daemon.terminate()
        for daemon in daemons.values():
            try:
                rest = daemon.communicate(timeout=10)[0]
            except subprocess.TimeoutExpired:
                daemon.kill()
                rest = daemon.communicate()[0]
            daemon.log = daemon.read_so_far + rest


def output_so_far(daemon, quiet_s=1.0):
    """What a running daemon (of job_daemons) printed that was not read yet: read until
    it has printed nothing for quiet_s (e.g. after SIGUSR1, its counts)."""
    read = b""
    while select.select([daemon.stdout], [], [], quiet_s)[0]:
        chunk = os.read(daemon.stdout.fileno(), 65536)
        if not chunk:
            break
        read += chunk
    text = read.decode(errors="replace")
    daemon.read_so_far += text
    return text


def job_to_come(workers):
    """A job not asked for yet, for start_program: its workers load and wait for its id
    on standard input (tell_job)."""
    return {"workers": list(workers), "id": None}


def start_program(bed, job, program, arguments, start_at=None, own=None):
    """`python -m program` in each worker of `job` (the POST /jobs answer, or
    job_to_come's) with the job's flags, `arguments`, and own.get(worker, []); the first
    round at wall-clock `start_at` if given. {worker: Popen}."""
    job_id = "-" if job["id"] is None else str(job["id"])
    starting = [] if start_at is None else ["--start-at", repr(start_at)]
    return {worker: bed.popen(worker, [sys.executable, "-m", program,
                                       "--controller", bed.management_url, "--job", job_id,
                                       "--name", worker, *arguments, *starting,
                                       *(own or {}).get(worker, [])],
                              stdin=subprocess.PIPE if job_id == "-" else None,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for worker in job["workers"]}


def tell_job(processes, job):
    """Give the workers started before their job (start_program) its id (a line each;
    communicate() closes their standard input)."""
    for process in processes.values():
        process.stdin.write("%d\n" % job["id"])
        process.stdin.flush()


def start_workers(bed, job, rounds, in_flight=1, seed=0, start_at=None, every_s=None,
                  compute_s=0.0):
    """Each worker of `job` running job_worker's `rounds` rounds (with every_s, round k
    at start_at + (k-1) x every_s on every worker; with compute_s, each round that long
    after the one before came back); {worker: Popen}."""
    every = [] if every_s is None else ["--every", repr(every_s)]
    computing = ["--compute-s", repr(compute_s)] if compute_s else []
    return start_program(bed, job, WORKER_PROGRAM, ["--rounds", str(rounds), "--in-flight",
                                                    str(in_flight), "--seed", str(seed), *every,
                                                    *computing], start_at)


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


def program_lines(processes, job, timeout_s=120):
    """{worker: the JSON lines its program printed}; RuntimeError if one failed."""
    lines = {w: worker_lines(p, timeout_s) for w, p in processes.items()}
    failed = {w: printed[-1] for w, printed in lines.items() if not printed or "error" in printed[-1]}
    if failed:
        raise RuntimeError("job %d: %s" % (job["id"], failed))
    return lines


def run_job(bed, job, rounds, in_flight=1, seed=0, timeout_s=120, start_in_s=None, every_s=None):
    """Run `rounds` rounds of `job` on every worker (all starting start_in_s from now, if
    given, and with every_s each round every_s after the one before, as ranks leave a
    barrier together); {worker: its per-round lines}, each {"round", "seconds", "exact",
    ...}. RuntimeError if a worker failed."""
    start_at = None if start_in_s is None else time.time() + start_in_s
    processes = start_workers(bed, job, rounds, in_flight, seed, start_at, every_s)
    lines = program_lines(processes, job, timeout_s + (rounds + 1) * (every_s or 0))
    return {w: printed[:-1] for w, printed in lines.items()}


@contextmanager
def served_job(bed, request, link_mbps=None):
    """POST /jobs `request`, the daemon on every host the job sums in that is not one of
    its workers; yields the job, and deletes it after. With link_mbps, warns on stderr
    if the job is more than this machine carries at that rate (warn_over_capacity)."""
    job = bed.client.request("POST", "/jobs", request)
    try:
        warn_over_capacity(job, link_mbps)
        with job_daemons(bed, job_servers(job)):
            yield job
    finally:
        bed.client.request("DELETE", "/jobs/%d" % job["id"])


def job_servers(report):
    """The hosts a job (POST or GET /jobs's answer) sums in that are not its workers:
    where the aggregator daemon must run."""
    return sorted(({s["host"] for s in report["shards"]} - set(report["workers"]))
                  | {a["host"] for a in report["aggregators"]})


def warn_over_capacity(report, link_mbps):
    """Say on stderr if the job's flows (report_load_mbps) are more than calibration says
    this machine carries, naming the rate at which they fit (platform_capacity.
    fitting_rate); nothing without a rate or a calibration."""
    if link_mbps is None:
        return
    try:
        rate, why = fitting_rate(link_mbps, report_load_mbps(report))
    except NotCalibrated:
        return
    if why:
        tqdm.write("warning: the job of %d workers and %d servers puts %s: give a --bw of at "
                   "most %g, or expect rows flagged not faithful, or rounds slowed by the "
                   "machine" % (len(report["workers"]), len(job_servers(report)), why, rate),
                   file=sys.stderr)


@contextmanager
def daemons_for(bed, request, link_mbps):
    """The aggregator daemon on each host the controller places a part of `request`'s
    job on (asked by making the job and releasing it: the planner is deterministic and
    the fabric is the same when the ranks ask again). A daemon on every host that may
    serve, as on real hosts, would poll the controller from 30 processes on 2 cores.
    Warns if the job is more than this machine carries at link_mbps."""
    probe = bed.client.request("POST", "/jobs", request)
    bed.client.request("DELETE", "/jobs/%d" % probe["id"])
    warn_over_capacity(probe, link_mbps)
    with job_daemons(bed, job_servers(probe)) as daemons:
        yield daemons


def report_load_mbps(report):
    """The Mbit/s of flows a job (POST or GET /jobs's answer) puts on the fabric, counted
    as planned_load_mbps counts a plan's: its workers' legs, its aggregates, and each
    shard's return once per worker it reaches (not one in the shard's own host)."""
    legs = sum(leg["rate_mbps"] for legs in report["destinations"].values() for leg in legs)
    aggregates = sum(a["rate_mbps"] for a in report["aggregators"])
    returns = sum(s["return"]["rate_mbps"] * len(tree["receivers"])
                  for s in report["shards"] for tree in s["return"]["trees"])
    return legs + aggregates + returns


def stream_plan(view, workers, candidates, floats, max_pss, placement):
    """The round that round_planner plans for the fabric on `floats` float32 (at most
    max_pss shards), its shards placed as `placement` says: on dedicated hosts among
    `candidates`, in the workers (colocated) or on the aggregators (in-network)."""
    return round_planner.plan_round(view, workers, candidates, wire_mbit(floats),
                                    max_pss=max_pss, placement=placement)


def stream_job(view, workers, candidates, floats, max_pss, placement):
    """The POST /jobs request of a streaming round (stream_plan) with its planned shards."""
    plan = stream_plan(view, workers, candidates, floats, max_pss, placement)
    return {"workers": workers, "model_bytes": floats * 4, "shards": len(plan.pss),
            "placement": placement, "mtu": data_mtu()}


def papers_job(mode, ps, workers, floats):
    """The POST /jobs request of a papers' mode, PARAMETERS+GRADIENTS (PAPERS_MODES): one
    PS on host `ps`, the gradients straight to it (ps) or summed on the way (ina), the
    sums back by unicast (a copy to each worker) or multicast (one tree)."""
    if mode not in PAPERS_MODES:
        raise ValueError("%r is none of the papers' modes (%s)" % (mode, ", ".join(PAPERS_MODES)))
    returns, gradients = mode.split("+")
    return {"workers": list(workers), "model_bytes": floats * 4, "shard_hosts": [ps],
            "returns": returns, "aggregation": gradients == "ina", "mtu": data_mtu()}


def mode_job(view, mode, workers, ps, candidates, floats, max_pss):
    """The POST /jobs request of a job's mode for `workers`: a papers' mode with its PS on
    `ps` (papers_job), or a streaming round (stream_job) of at most max_pss shards, on
    dedicated hosts among `candidates`, in the workers or on the aggregators as
    STREAM_PLACEMENT says."""
    if mode in PAPERS_MODES:
        return papers_job(mode, ps, workers, floats)
    return stream_job(view, workers, candidates, floats, max_pss, STREAM_PLACEMENT[mode])


def papers_plan(view, mode, ps, workers, floats):
    """The round the controller plans for papers_job's request on an idle fabric."""
    request = papers_job(mode, ps, workers, floats)
    return round_planner.plan_job(view, list(workers), wire_mbit(floats), round_planner.DEDICATED,
                                  1, request["aggregation"], returns=request["returns"],
                                  candidates=[ps])


def planned_load_mbps(view, workers, candidates, floats, max_pss, placement):
    """The Mbit/s of flows the round stream_plan plans puts on the fabric: every worker's
    legs, every aggregate, and each shard's return once per receiver, as calibration's
    all-to-all counts its flows (what --bw auto fits to the machine)."""
    return plan_load_mbps(stream_plan(view, workers, candidates, floats, max_pss, placement))


def plan_load_mbps(plan):
    """The Mbit/s of flows a round_planner.RoundPlan puts on the fabric, counted as
    planned_load_mbps does."""
    returns = sum(tree.bandwidth_mbps * len(tree.receivers) for tree in plan.trees)
    return sum(stream[3] for stream in plan.gradients.streams()) + returns


def round_totals(per_worker):
    """What a round took over every worker (their lines of it): datagrams sent and resent,
    those of the first pass sent borrowed and, of them, lost (a job that borrows), repair
    requests, and the slowest first pass against the time its rates plan."""
    return {"sent": sum(r["sent"] for r in per_worker),
            "resent": sum(r["resent"] for r in per_worker),
            "borrowed": sum(r.get("borrowed", 0) for r in per_worker),
            "borrowed_lost": sum(r.get("borrowed_lost", 0) for r in per_worker),
            "repair_requests": max(r["repair_requests"] for r in per_worker),
            "rate_ratio": min(r["planned_first_pass_s"] / r["first_pass_s"]
                              for r in per_worker if r["first_pass_s"] > 0)}


def job_rounds(lines):
    """Per round, over every worker: its time (the slowest worker's), when it ran (the
    first start to the last end, time.time()), whether every sum was exact, the oldest
    generation of the job's rates a first pass of it went at, and round_totals."""
    return [dict(round_totals(per_worker), round=per_worker[0]["round"],
                 generation=min(r["generation"] for r in per_worker),
                 comm_s=max(r["seconds"] for r in per_worker),
                 started_at=min(r["started_at"] for r in per_worker),
                 ended_at=max(r["started_at"] + r["seconds"] for r in per_worker),
                 exact=all(r["exact"] for r in per_worker))
            for per_worker in zip(*lines.values())]


def job_round_fidelity(row, usage):
    """Whether the emulator kept up with a round (fidelity.verdict): the workers' first
    pass against the time their rates plan, and the share of fragments sent again, but
    for borrowed ones lost: the borrowed class is what switches drop by design."""
    resent = row["resent"] - row.get("borrowed_lost", 0)
    return fidelity.verdict(1.0, row["rate_ratio"], resent / max(row["sent"], 1), resent, usage)
