"""Joining DDP's ranks to a job, as fabric_hook registers: each rank's fabric host (its
data-plane address, GLOO_SOCKET_IFNAME's, looked up in the controller's topology, or
host=), one job for them all posted by rank 0 with the model's gradient bytes, and the
job released once at destroy_process_group or at exit. Every decision is taken
together: a problem on any rank is every rank's error (or fallback)."""

import atexit
import concurrent.futures
import fcntl
import logging
import os
import signal
import socket
import struct
import sys

import numpy as np
import torch
import torch.distributed as dist

from syncfabric.hosts.transport.controller_client import ADMISSION_TIMEOUT_S, ControllerClient
from syncfabric.hosts.jobs.fabric_worker import FabricJob, FabricWorker, job_request
from syncfabric.hosts.jobs.job_layout import JobError
from syncfabric.hosts.jobs.round_stalls import ROUND_FAIL_S, round_fail_s
from syncfabric.hosts.packets.gradient_wire import MAX_WORKERS
from syncfabric.hosts.packets.wire import data_mtu

LOG = logging.getLogger("syncfabric.torch")
WIRE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)   # summed as float32 on the wire
SIOCGIFADDR = 0x8915    # Linux: an interface's IPv4 address
# registration's round of zeros takes at most this (and a long round's prediction more:
# first_round_s); a round without progress fails sooner, naming a host
FIRST_ROUND_S = 2 * ROUND_FAIL_S


class FabricHookError(RuntimeError):
    """What keeps a model's gradients off the fabric, and what to do about it."""


def interface_address(interface):
    """The IPv4 address of a network interface (e.g. GLOO_SOCKET_IFNAME's)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            answer = fcntl.ioctl(sock.fileno(), SIOCGIFADDR,
                                 struct.pack("256s", interface.encode()[:15]))
        except OSError as error:
            raise FabricHookError("interface %s has no IPv4 address (%s): set GLOO_SOCKET_IFNAME "
                                  "to the data-plane interface, or pass host=" % (interface, error)) from None
    return socket.inet_ntoa(answer[20:24])


def local_host(client, host):
    """This rank's host in the fabric: `host`, or the one whose address is that of
    GLOO_SOCKET_IFNAME's interface in GET /fabric/topology."""
    if host is not None:
        return host
    interface = os.environ.get("GLOO_SOCKET_IFNAME")
    if not interface:
        raise FabricHookError("which fabric host is this rank? set GLOO_SOCKET_IFNAME to its "
                              "data-plane interface (Gloo uses it too), or pass host=")
    address = interface_address(interface)
    hosts = {h["ip"]: h["name"] for h in client.get("/fabric/topology").get("hosts", [])}
    if address not in hosts:
        raise FabricHookError("no host of the controller's fabric has %s's address %s; pass host="
                              % (interface, address))
    return hosts[address]


def where_gradients_are(model, group):
    """FabricHookError unless the hook can take the model's buckets: parameters in host
    memory (the fabric's data path reads and writes them there), and a Gloo process
    group (the ranks agree over it, and a bucket that falls back is reduced over it;
    NCCL's collectives take only CUDA tensors). Checked at registration, rather than
    failing in the first backward."""
    backend = dist.get_backend(group)
    if backend != dist.Backend.GLOO:
        raise FabricHookError("the process group's backend is %s: the hook runs beside a Gloo "
                              "group (init_process_group(\"gloo\"), or pass process_group= a "
                              "Gloo group); pass fallback=True to leave every bucket to %s"
                              % (backend, backend))
    devices = sorted({str(parameter.device) for parameter in model.module.parameters()
                      if parameter.requires_grad and parameter.device.type != "cpu"})
    if devices:
        raise FabricHookError("the model's parameters are on %s: the fabric sums gradients in "
                              "host memory; train on the CPU, or pass fallback=True to leave "
                              "every bucket to the process group" % ", ".join(devices))


def wire_floats(model, fallback):
    """float32 values a step's gradients take on the wire (float16 and bfloat16 go as
    float32); other dtypes are an error, or (fallback) reduced by the process group."""
    floats, others = 0, set()
    for name, parameter in model.module.named_parameters():
        if not parameter.requires_grad:
            continue
        if parameter.dtype in WIRE_DTYPES:
            floats += parameter.numel()
        else:
            others.add("%s (%s)" % (name, parameter.dtype))
    if others and not fallback:
        raise FabricHookError("the fabric sums float32, float16 and bfloat16 gradients, not %s; "
                              "cast the model, or pass fallback=True to reduce those over the "
                              "process group" % ", ".join(sorted(others)))
    return floats


def hosts_problem(names, world):
    """Why these ranks' hosts (None where a rank had a problem) cannot make one job."""
    if world > MAX_WORKERS:
        return "%d ranks: a job's wire format carries at most %d workers" % (world, MAX_WORKERS)
    seen = {}
    for rank, name in enumerate(names):
        if name in seen:
            return "ranks %d and %d are both on host %s: the fabric takes one rank per host" \
                   % (seen[name], rank, name)
        seen[name] = rank
    return None


def agree_on_job(controller, host, floats, agreement, job_options):
    """Every rank's (FabricJob, its host name) for one job of the ranks' hosts in rank
    order, the ranks agreeing by `agreement` (agreement.py); FabricHookError on every
    rank if any rank, or the controller, says no."""
    client = ControllerClient(controller, timeout_s=ADMISSION_TIMEOUT_S)
    try:
        mine = local_host(client, host)
    except Exception as error:   # the controller does not answer, or the host is unknown
        mine = FabricHookError("rank %d: %s" % (agreement.rank, error))
    everyone = agreement.gathered(mine)
    problems = [str(item) for item in everyone if isinstance(item, Exception)]
    outcome = None
    if agreement.rank == 0:
        outcome = "; ".join(problems) or hosts_problem(everyone, len(everyone)) \
            or created_job(client, everyone, floats, job_options)
    outcome = agreement.gathered(outcome)[0]   # rank 0's
    if isinstance(outcome, str):
        raise FabricHookError(outcome)
    return FabricJob(client, outcome, agreement.rank == 0), mine


def open_worker(job, name, agreement):
    """This rank's FabricWorker of `job`, once every rank has opened its own (sockets
    bound), then heard every summing node it sends to answer (the daemons serve the
    job, the other ranks' shards are open), then taken the first round; if any rank
    cannot, every rank closes its worker, the job is released and every rank raises
    FabricHookError."""
    worker = on_every_rank(lambda: FabricWorker(job, name), None, job, name, agreement)
    on_every_rank(worker.wait_served, worker, job, name, agreement)
    on_every_rank(lambda: first_round(worker), worker, job, name, agreement)
    return worker


def first_round(worker):
    """A round of zeros through the job before training, as DDP's constructor sends the
    parameters over Gloo before its first step: every path and summing node has carried
    a round (one that cannot fails here, naming the host at fault), and the costs of a
    first round (each node's first sums, the switches' first packets of each flow) are
    not the first step's. It took the first step of experiments.ddp from 0.42-0.57 s to
    0.37 s (8 ranks, 52 Mbit/s; later steps 0.25 s). JobError if it does not come back
    in first_round_s."""
    layout, timeout_s = worker.layout, first_round_s(worker.layout)
    try:
        worker.allreduce(np.zeros(layout.floats, dtype=np.float32), timeout=timeout_s)
    except concurrent.futures.TimeoutError:
        raise JobError("its first round (zeros, %.1f MB, predicted to take %.1f s) did not "
                       "come back in %.1f s" % (4 * layout.floats / 1e6,
                                                layout.predicted_round_s or 0.0,
                                                timeout_s)) from None


def first_round_s(layout):
    """How long registration's round of zeros may take: the round the controller
    predicts, and as long as a round may go without progress (round_fail_s), at least
    FIRST_ROUND_S. A flat FIRST_ROUND_S failed every round of 25 MB at 16 ranks
    (predicted 13.3 s at 15.9 Mbit/s), and the group went to Gloo."""
    predicted_s = layout.predicted_round_s or 0.0
    return max(FIRST_ROUND_S, predicted_s + round_fail_s(layout))


def on_every_rank(action, worker, job, name, agreement):
    """action()'s result, once it worked on every rank (they agree by `agreement`)."""
    try:
        result, problem = action(), None
    except Exception as error:   # this host cannot bind the job's ports; a silent daemon
        result, problem = None, "rank %d (%s): %s" % (agreement.rank, name,
                                                      str(error) or type(error).__name__)
    problems = agreement.gathered(problem)
    if any(problems):
        for opened in (worker, result):
            if isinstance(opened, FabricWorker):
                opened.close()
        job.release()
        raise FabricHookError("job %d cannot run on these hosts: %s"
                              % (job.id, "; ".join(p for p in problems if p)))
    return result


def created_job(client, hosts, floats, job_options):
    """POST /jobs for `hosts`: the job's report, or why there is none (a string)."""
    try:
        report = client.request("POST", "/jobs", job_request(
            hosts, 4 * floats, **dict({"mtu": data_mtu()}, **job_options)))
    except Exception as error:   # refused (409: the fabric lacks room), or no controller
        return "the controller made no job for %d ranks of %d gradient bytes: %s" % (
            len(hosts), 4 * floats, error)
    LOG.info("job %d: %d ranks, %d shard(s), %d aggregator(s), round predicted %.3f s "
             "(lower bound %.3f s)", report["id"], len(hosts), len(report["shards"]),
             len(report["aggregators"]), report["predicted_round_s"], report["lower_bound_s"])
    return report


LIVE = []   # the reducers of this process, closed at destroy_process_group or exit


def release_at_end(reducer):
    """Close `reducer` (and release its job) at destroy_process_group, after every rank
    is there, or at exit, including one by SIGTERM (torchrun's when a rank fails)."""
    if not getattr(dist.destroy_process_group, "releases_fabric_jobs", False):
        original = dist.destroy_process_group

        def destroy_process_group(*args, **kwargs):
            close_all(synchronize=True)
            return original(*args, **kwargs)
        destroy_process_group.releases_fabric_jobs = True
        dist.destroy_process_group = destroy_process_group
        atexit.register(close_all)
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            try:
                signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
            except ValueError:   # not the main thread: exit by SIGTERM leaves the job to its lease
                LOG.warning("fabric_hook was not called in the main thread: a SIGTERM will "
                            "not release the job")
    LIVE.append(reducer)


def close_and_release(worker, job):
    """Close this rank's `worker`, then release `job` (rank 0's handle does; the others'
    do nothing); if the controller does not answer, say what is left behind."""
    try:
        worker.close()
    finally:
        try:
            job.release()
        except Exception as error:   # e.g. the controller is down
            LOG.error("job %d was not released (%s): DELETE /jobs/%d once the controller "
                      "answers", job.id, error, job.id)


def close_all(synchronize=False):
    while LIVE:
        reducer = LIVE.pop()
        if synchronize:
            try:   # no rank releases the job while another still needs its sums
                dist.barrier(reducer.group)
            except Exception as error:   # a rank is gone (Gloo sees its sockets close)
                LOG.warning("ranks did not all reach destroy_process_group: %s", error)
        reducer.close()
