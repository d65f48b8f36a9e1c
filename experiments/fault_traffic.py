"""What experiments.fault_recovery runs through a fault, one runner per --traffic. Each
starts its traffic in the testbed, lets the fault in (`fault.started`) when the traffic
it should meet is under way, and returns what it measured: whether every byte or sum
came out right (verified), what the fault cost against the same traffic without it in
the same run (the baseline), and `kept_up(usage)`, the emulator's fidelity verdict.

- tree: the model over a reserved path-aware tree, twice: the baseline, then the fault;
- gradients: GRID's rounds as a job (the papers' multicast+ina), as `job` runs one;
- training: experiments.train's multicast+ina job, the fault in round FAULT_ROUND;
- job: a job as users run it (POST /jobs, the daemons, the library in every worker),
  the fault FAULT_ROUND rounds in; the rounds it lasted through are its, the others the
  baseline.
"""

import statistics
import threading
import time

from experiments import fidelity
from experiments.defaults import JOB_START_S, ROUNDS_APART
from experiments.sim.fabrics import servers
from experiments.traffic.jobs import (job_round_fidelity, job_rounds, papers_job, run_job,
                                     served_job)
from experiments.traffic.model_transfer import run_transfer
from experiments.traffic.training_jobs import run_job_training
from syncfabric.hosts.training.digits_mlp import TrainingSetup
from syncfabric.hosts.packets.wire import data_mtu

FAULT_ROUND = 3   # --traffic training and job: the round the fault comes in
TRAFFIC = ("tree", "gradients", "training", "job")


def tree_traffic(bed, view, args, fault):
    """h1's model to the next --workers hosts over a reserved path-aware tree: once
    without the fault (the silence and loss the emulator gives on its own), then with
    it. gap_ms and lost_ms are the faulty transfer's; baseline_gap_ms and
    baseline_lost_ms the same measures of the first."""
    baseline = transfer(bed, view, args)
    fault.started.set()
    result = transfer(bed, view, args)
    return dict(result, verified=result["verified"] and baseline["verified"],
                baseline_gap_ms=baseline["gap_ms"], baseline_lost_ms=baseline["lost_ms"],
                kept_up=lambda usage: fidelity.verdict(None, None, None, 0, usage))


def transfer(bed, view, args):
    hosts = servers(view)
    (result,) = run_transfer(bed, hosts[0], hosts[1:args.workers + 1], "path-aware",
                             args.model_mb, args.rate_fraction * args.bw)
    return result


def gradient_traffic(bed, view, args, fault):
    """GRID's rounds as a job: the papers' multicast+ina (the first --workers hosts, the
    PS the last host, the gradients summed in the aggregators on the way), run as
    job_traffic runs a job."""
    hosts = servers(view)
    return rounds_through(bed, args, fault, papers_job(
        "multicast+ina", hosts[-1], hosts[:args.workers], model_floats(args.model_mb)))


def training_traffic(bed, view, args, fault):
    """experiments.train's multicast+ina job, the fault --fail-after-s into round
    FAULT_ROUND (as its predicted round times place it): the faulty round's time against
    the median of the others."""
    hosts = servers(view)
    setup = TrainingSetup(workers=args.workers)
    request = papers_job("multicast+ina", hosts[-1], hosts[:args.workers], setup.parameter_count)
    timer = []

    def started(job, start_at):
        timer.append(threading.Timer(start_at - time.time() + (FAULT_ROUND - 1)
                                     * job["predicted_round_s"], fault.started.set))
        timer[0].start()
    try:
        results = run_job_training(bed, request, setup, args.rounds, on_started=started)
    finally:
        for waiting in timer:
            waiting.cancel()
    faulty = results[FAULT_ROUND - 1]
    healthy_s = statistics.median(r["round_s"] for r in results if r is not faulty)
    first = {k: results[0].get(k) for k in fidelity.COLUMNS}
    return {"verified": all(r["verified"] and r["test_accuracy"] == r["reference_accuracy"]
                            for r in results),
            "completion_s": faulty["round_s"], "healthy_s": healthy_s,
            "extra_s": faulty["round_s"] - healthy_s,
            "repair_passes": faulty["gradient_repair_passes"],
            "kept_up": lambda _usage: first}


def model_floats(model_mb):
    """The float32s of a model of model_mb MB."""
    return int(model_mb * 1e6) // 4


def job_request(view, workers, model_mb):
    """POST /jobs's body for --traffic job: the first `workers` hosts, a model_mb model
    of float32s, everything else the controller's defaults (shards, placement)."""
    return {"workers": servers(view)[:workers], "model_bytes": model_floats(model_mb) * 4,
            "mtu": data_mtu()}


def job_traffic(bed, view, args, fault):
    """A job of the --workers first hosts with the controller's defaults (rounds_through)."""
    return rounds_through(bed, args, fault, job_request(view, args.workers, args.model_mb))


def rounds_through(bed, args, fault, request):
    """The job `request` asks for: --rounds rounds of whole-number gradients, every sum
    checked, each round ROUNDS_APART times its predicted time after the one before; the
    fault comes --fail-after-s into round FAULT_ROUND. The rounds that ran while it
    lasted (fault.overlaps) are its: the slowest of them against the median of the
    others, and the datagrams workers sent again in them (resent) against a healthy
    round's (healthy_resent)."""
    with served_job(bed, request, args.bw) as job:
        every_s = ROUNDS_APART * job["predicted_round_s"]
        fault_round_in_s = JOB_START_S + (FAULT_ROUND - 1) * every_s
        timer = threading.Timer(fault_round_in_s, fault.started.set)
        timer.start()
        try:
            rounds = job_rounds(run_job(bed, job, args.rounds, start_in_s=JOB_START_S,
                                        every_s=every_s))
        finally:
            timer.cancel()
    faulty = [r for r in rounds if fault.overlaps(r["started_at"], r["ended_at"])]
    healthy = [r for r in rounds if r not in faulty]
    if not faulty or not healthy:
        raise RuntimeError("the fault met %d of the job's %d rounds: nothing to compare (give "
                           "more --rounds)" % (len(faulty), len(rounds)))
    slowest = max(faulty, key=lambda r: r["comm_s"])
    healthy_s = statistics.median(r["comm_s"] for r in healthy)
    judged = healthy[len(healthy) // 2]
    return {"verified": all(r["exact"] for r in rounds),
            "completion_s": slowest["comm_s"], "healthy_s": healthy_s,
            "extra_s": slowest["comm_s"] - healthy_s,
            "repair_passes": max(r["repair_requests"] for r in faulty),
            "faulty_rounds": len(faulty), "during_transfer": True,
            "resent": sum(r["resent"] for r in faulty),
            "healthy_resent": statistics.median(r["resent"] for r in healthy),
            "kept_up": lambda usage: job_round_fidelity(
                judged, usage.during(judged["started_at"], judged["ended_at"]))}


RUNNERS = {"tree": tree_traffic, "gradients": gradient_traffic, "training": training_traffic,
           "job": job_traffic}

