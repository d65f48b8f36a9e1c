"""A gradient policy's rounds as a job, as experiments.ina and the papers' worked examples
run them: POST /jobs with the PSs named (`shard_hosts`) and the policy (`gradient_policy`:
GRID's or a baseline's for one PS, InArt's or a baseline's for several), whole-number
gradients from every worker (job_worker), every sum checked, and each sum back on its
shard's tree as the job returns it. What a paper plans stays a plan (GRID's routing,
InArt's split); the rounds run on the one engine every job runs on.
"""

from experiments.defaults import JOB_START_S, ROUNDS_APART
from experiments.traffic.jobs import job_round_fidelity, job_rounds, run_job, served_job
from syncfabric.hosts.packets.gradient_wire import gradient_floats
from syncfabric.hosts.packets.wire import data_mtu
from syncfabric.services.job_reports import gradient_mbit


def policy_job(workers, pss, policy, gradient_mb):
    """The POST /jobs request: `workers` sending gradient_mb MB each to `pss`, planned by
    `policy`."""
    return {"workers": list(workers), "model_bytes": gradient_floats(gradient_mb) * 4,
            "shard_hosts": list(pss), "gradient_policy": policy, "mtu": data_mtu()}


def run_policy_rounds(bed, request, rounds, link_mbps=None, before_release=None):
    """Run `rounds` rounds of the job `request` asks for; (the job, its INA plan as GET
    /ina/plans reports it, one dict per round). A round has comm_time_s (its slowest
    worker's), min_rate_mbps (a worker's gradient on the wire over it), ps_ingress_mbps
    (what the PSs' switch ports sent them over the rounds' time, the same for every
    round), verified, repair_passes and the fidelity verdict. before_release(job, plan):
    after the rounds, while the job's flows are still on the switches."""
    pss = request["shard_hosts"]
    with served_job(bed, request, link_mbps) as job:
        plan = bed.client.get("/ina/plans/%d" % job["plan"])
        sampling = bed.sampler().start()
        before = sum(bed.switch_port_bytes(ps)[1] for ps in pss)
        results = job_rounds(run_job(bed, job, rounds, start_in_s=JOB_START_S,
                                     every_s=ROUNDS_APART * job["predicted_round_s"]))
        received = sum(bed.switch_port_bytes(ps)[1] for ps in pss) - before
        usage = sampling.stop()
        if before_release is not None:
            before_release(job, plan)
    mbit = gradient_mbit(request, len(pss))
    comm_s = sum(r["comm_s"] for r in results)
    return job, plan, [dict(job_round_fidelity(r, usage.during(r["started_at"], r["ended_at"])),
                            comm_time_s=r["comm_s"], min_rate_mbps=mbit / r["comm_s"],
                            ps_ingress_mbps=received * 8 / 1e6 / comm_s, verified=r["exact"],
                            repair_passes=r["repair_requests"])
                       for r in results]
