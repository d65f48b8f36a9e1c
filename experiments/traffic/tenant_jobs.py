"""Several jobs on one testbed at once, each arriving at its own time and leaving when
its rounds are done, as tenants of a shared fabric run them: through the controller
(POST /jobs, the library in every worker, the daemons already serving the aggregator
hosts) or through Gloo's all-reduce. A fabric job refused with 409 runs over Gloo
instead, as the hook's fallback=True does.

Each job's rows are its rounds: when each started (time.time()), how long it took
(the slowest worker's), whether its sum was exact, and, for a fabric job, the
generation of its rates its workers paced that round at and the rate and fair share the
controller gave it then (read from GET /jobs/<id> while it ran).
"""

import threading
import time
from dataclasses import dataclass, field

from experiments.traffic.gloo_peers import run_ranks
from experiments.traffic.jobs import (job_rounds, job_to_come, program_lines, start_workers,
                                      tell_job)
from syncfabric.hosts.packets.gradient_wire import HEADER
from syncfabric.hosts.transport.controller_client import (ADMISSION_TIMEOUT_S, ControllerClient,
                                                ControllerHttpError)

WATCH_S = 0.25   # how often a fabric job's report is read while it runs


@dataclass
class Tenant:
    """Job `index`: its workers, when it arrives (seconds after the first) and its
    float32 model's bytes."""
    index: int
    workers: list
    arrives_s: float
    model_bytes: int


@dataclass
class TenantRun:
    """What one job did: its rounds' rows, when it arrived and left (time.time()), how it
    ran ("fabric", or "gloo" also for a fabric job refused and fallen back), and why it
    was refused or failed."""
    tenant: Tenant
    rows: list = field(default_factory=list)
    arrived_at: float = None
    left_at: float = None
    ran_as: str = "gloo"
    refusal: str = None
    failure: str = None


def gloo_rounds(bed, workers, floats, rounds, start_at=None, seed=0, compute_s=0.0):
    """Gloo's all-reduce among `workers`, `rounds` rounds from start_at (time.time();
    None: once the ranks have joined), back to back or compute_s apart: rows of round,
    started_at, round_s, verified."""
    starting = [] if start_at is None else ["--start-at", repr(start_at)]
    results = run_ranks(bed, workers, "syncfabric.hosts.training.gloo_peers",
                        ["--workers", str(len(workers)), "--floats", str(floats), "--rounds",
                         str(rounds), "--patterns", "allreduce", "--seed", str(seed),
                         "--compute-s", repr(compute_s), *starting])
    return [{"round": r["round"], "started_at": r["started_at"], "round_s": r["comm_s"],
             "verified": r["verified"], "rate_ratio": None, "resent": 0, "sent": 0}
            for r in results]


class ReportWatch:
    """A fabric job's reports, read every WATCH_S while it runs: [(time.time(), report)]."""

    def __init__(self, client, job_id):
        self.client, self.job_id, self.seen = client, job_id, []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self):
        while not self.stopping.wait(WATCH_S):
            try:
                self.seen.append((time.time(), self.client.get("/jobs/%d" % self.job_id)))
            except (OSError, ControllerHttpError):
                pass

    def stop(self):
        self.stopping.set()
        self.thread.join()

    def in_round(self, generation, ended_at):
        """(the report of the generation a round's first passes went at, the report the
        controller gave last before the round ended: its fair share and window then). A
        generation too short-lived for any read to see is told by the nearest one read (the
        older of two as near)."""
        reports = [report for _at, report in self.seen]
        its = min(reversed(reports), key=lambda r: (abs(r["generation"] - generation),
                                                    r["generation"]))
        before = [report for at, report in self.seen if at <= ended_at] or reports[:1]
        return its, before[-1]


def fabric_rounds(bed, request, rounds, run, arrival, compute_s=0.0):
    """At `arrival` (time.time()), POST /jobs `request` and run its `rounds` rounds in its
    workers (job_worker), back to back or compute_s apart; fills `run` (TenantRun). The
    workers are started before, as Gloo's ranks are, and wait for the job's id: their
    loading is not counted, the admission is. Refused (409): its rounds over Gloo
    instead."""
    client = ControllerClient(bed.client.base_url, ADMISSION_TIMEOUT_S, bed.client.token)
    workers = start_workers(bed, job_to_come(request["workers"]), rounds, compute_s=compute_s)
    time.sleep(max(0.0, arrival - time.time()))
    try:
        job = client.request("POST", "/jobs", request)
    except ControllerHttpError as error:
        for process in workers.values():
            process.kill()
            process.communicate()
        if error.status != 409:
            raise
        run.refusal = str(error)
        run.rows = gloo_rounds(bed, request["workers"], request["model_bytes"] // 4, rounds,
                               compute_s=compute_s)
        return   # its processes start now: it pays their loading, as a fallback does
    run.ran_as = "fabric"
    watch = ReportWatch(bed.client, job["id"])
    try:
        tell_job(workers, job)
        lines = program_lines(workers, job, timeout_s=(60 + compute_s) * rounds)
    finally:
        watch.stop()
        client.request("DELETE", "/jobs/%d" % job["id"])   # its creator holds the key
    for result in job_rounds({w: printed[:-1] for w, printed in lines.items()}):
        report, then = watch.in_round(result["generation"], result["ended_at"])
        run.rows.append(dict(result, round_s=result["comm_s"], verified=result["exact"],
                             share_mbps=report["rate_mbps"],
                             fair_share_mbps=then["fair_share_mbps"],
                             period_s=then.get("period_s"),
                             phase_offset_s=then.get("phase_offset_s"),
                             predicted_s=report["predicted_round_s"],
                             datagram_bytes=job["fragment_bytes"] + HEADER.size))


def run_tenants(tenants, run_one, started_at):
    """Each tenant in a thread of its own: run_one(tenant, run, arrival) fills its
    TenantRun, called at once and waiting for its arrival (started_at + arrives_s,
    time.time()) itself, its processes loaded meanwhile (Gloo's ranks take seconds to
    load torch). Returns them once all have left; a job that failed has no rows and says
    why in `failure` (the others' rounds are kept)."""
    runs = [TenantRun(tenant) for tenant in tenants]

    def tenant_thread(run):
        run.arrived_at = started_at + run.tenant.arrives_s
        try:
            run_one(run.tenant, run, run.arrived_at)
        except Exception as error:   # reported with the run's results
            run.rows, run.failure = [], "job %d: %s" % (run.tenant.index, error)
        run.left_at = time.time()
    threads = [threading.Thread(target=tenant_thread, args=(run,), daemon=True) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return runs
