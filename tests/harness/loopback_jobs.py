"""Jobs on one machine's loopback addresses (127.0.0.x are all this host's), with no
fabric: a controller stand-in that answers the job API with a job whose shards are in
the workers (no daemon needed), DDP ranks started as processes on it, and a check that
two workers' rounds are exact."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import wait
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

FRAGMENT_BYTES = 1448
RATE_MBPS = 400.0


def address(worker_index):
    return "127.0.0.%d" % (11 + worker_index)


def loopback_job(job_id, workers, model_bytes, port, rate_mbps=RATE_MBPS,
                 fragment_bytes=FRAGMENT_BYTES, returns="multicast", gather=False,
                 scatter=False):
    """The POST /jobs answer for `workers` on loopback: shard i in worker i, returned on
    group 239.77.<job>.<i> (with unicast returns, to worker k alone on 239.<100+i>.<job>.<k>),
    every worker sending each other shard its fragments (of fragment_bytes:
    FRAGMENT_BYTES fill a 1500-byte MTU) at rate_mbps; `gather`: a gather job's, each
    shard's sums its own worker's values, no worker sending any; `scatter`: a scatter
    job's, each shard's sums kept in its own worker, no return trees."""
    count = -(-model_bytes // fragment_bytes)
    cuts = [count * i // len(workers) for i in range(len(workers) + 1)]
    addresses = {w: address(i) for i, w in enumerate(workers)}
    shards = [{"host": w, "address": addresses[w], "port": port + i,
               "fragments": [cuts[i], cuts[i + 1]],
               "bytes": [cuts[i] * fragment_bytes, min(cuts[i + 1] * fragment_bytes, model_bytes)],
               "return": ({"port": port + i, "rate_mbps": rate_mbps, "trees": []} if scatter else
                          one_tree(i + 1, "239.77.%d.%d" % (job_id % 250, i), port + i, rate_mbps,
                                   [other for other in workers if other != w])
                          if returns == "multicast" else
                          tree_each(i, job_id, port + i, rate_mbps, workers))}
              for i, w in enumerate(workers) if cuts[i] < cuts[i + 1]]
    destinations = {w: [{"shard": i, "host": s["host"], "address": s["address"], "port": s["port"],
                         "fragments": s["fragments"], "rate_mbps": rate_mbps}
                        for i, s in enumerate(shards) if s["host"] != w and not gather]
                    for w in workers}
    return {"id": job_id, "generation": 1, "release_key": "k", "workers": list(workers),
            "gather": gather, "scatter": scatter,
            "model_bytes": model_bytes, "fragment_bytes": fragment_bytes, "fragments": count,
            "addresses": addresses, "shards": shards, "destinations": destinations,
            "aggregators": [], "predicted_round_s": 0.01, "lower_bound_s": 0.01}


def one_tree(tree_id, group, port, rate_mbps, receivers):
    """A shard's "return" in a job's report: one multicast tree to `receivers`."""
    return {"port": port, "rate_mbps": rate_mbps,
            "trees": [{"tree": tree_id, "group": group, "receivers": list(receivers)}]}


def tree_each(shard, job_id, port, rate_mbps, workers):
    """Shard `shard`'s "return" by unicast: a tree to each other worker alone."""
    receivers = [w for k, w in enumerate(workers) if k != shard]
    return {"port": port, "rate_mbps": rate_mbps,
            "trees": [{"tree": 100 * shard + k, "group": "239.%d.%d.%d" % (100 + shard, job_id % 250, k),
                       "receivers": [w]} for k, w in enumerate(receivers)]}


def stand_in_ports():
    """The first of the stand-in's jobs' UDP ports: 29400, and 1000 more for each further
    process of a parallel run (pytest-xdist's gw0, gw1, ...), so that jobs of tests running
    side by side never share a port."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    return 29400 + 1000 * int(worker[2:])


class StubController:
    """The job API on loopback: POST makes loopback_job (or answers `refuse`'s status, or
    for a gather job refuse_gather's, for a scatter job refuse_scatter's), GET and DELETE of /jobs/<id>, PUT
    /jobs/<id>/lease, and GET /fabric/topology listing `topology`. It records what was
    asked (`posted`, `renewed`, `deleted`) and what is live (`jobs`)."""

    def __init__(self, topology=(), refuse=None, port=None, refuse_gather=None,
                 refuse_scatter=None):
        self.topology, self.refuse = list(topology), refuse
        self.refuse_gather, self.refuse_scatter = refuse_gather, refuse_scatter
        self.port = stand_in_ports() if port is None else port
        self.addresses = {}   # hosts whose address in the jobs is not their loopback one
        self.jobs, self.posted, self.renewed, self.deleted = {}, [], [], []
        self.away = False   # answer 503 to everything, as a controller restoring its jobs
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def answer(self, method, path, body):
        with self.lock:
            if self.away:
                return 503, {"error": "restoring the jobs saved before a restart"}
            if method == "GET" and path == "/fabric/topology":
                return 200, {"hosts": self.topology}
            if method == "POST" and path == "/jobs":
                self.posted.append(body)
                refuse = self.refuse_gather if body.get("gather") else \
                    self.refuse_scatter if body.get("scatter") else None
                refuse = self.refuse if self.refuse is not None else refuse
                if refuse is not None:
                    return refuse, {"error": "the workers' links lack room",
                                         "bottleneck": "h1->leaf1", "max_rate_mbps": 1.0}
                job_id = len(self.posted)
                job = self.jobs[job_id] = loopback_job(job_id, body["workers"],
                                                       body["model_bytes"], self.port + 20 * job_id,
                                                       gather=body.get("gather", False),
                                                       scatter=body.get("scatter", False))
                job.update(addresses=dict(job["addresses"], **self.addresses),
                           ttl_s=body.get("ttl_s"))
                return 201, job
            job_id = int(path.split("?")[0].split("/")[2]) if path.startswith("/jobs/") else None
            if job_id not in self.jobs:
                return 404, {"error": "no such job"}
            if method == "PUT" and path.endswith("/lease"):
                self.renewed.append((job_id, body["ttl_s"]))
                return 200, self.jobs[job_id]
            if method == "DELETE":
                self.deleted.append(job_id)
                return 200, self.jobs.pop(job_id)
            return 200, self.jobs[job_id]

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                status, answer = stub.answer(self.command, self.path, body)
                payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *_args):
                pass
        return Handler


def assert_exact_rounds(workers, floats, rounds=3):
    """`rounds` all-reduces of the workers' whole numbers (exact in any order), every
    sum checked."""
    values = [np.arange(floats, dtype=np.float32) % 1000 + k for k in range(len(workers))]
    for _round in range(rounds):
        futures = [w.allreduce_async(v) for w, v in zip(workers, values)]
        wait(futures, timeout=20)
        for future in futures:
            assert np.array_equal(future.result(), np.sum(values, axis=0))


def assert_identical_at_every_step(answers, steps=5):
    """tests/harness/ddp_ranks.py's answers: no error, and every rank's parameters alike
    after each of `steps` steps."""
    for answer in answers:
        assert answer["error"] is None, answer.get("traceback")
        assert all(len(set(hashes)) == 1 for hashes in answer["hashes"])
        assert len(answer["hashes"]) == steps


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_ranks(world, arguments, timeout_s=120, environment=None,
              module="tests.harness.ddp_ranks"):
    """`module` (the hook's DDP ranks by default) as `world` ranks on loopback; each
    rank's JSON answer. A rank's output goes to a file, not a pipe: through a pipe, a
    rank's answer of 128 KB arrived cut at 64 KB in 2 of 26 runs on a loaded
    2-core machine (the rank had written it whole, and exited 0)."""
    port = free_port()
    outputs = [tempfile.TemporaryFile("w+") for _rank in range(world)]
    processes = [subprocess.Popen(
        [sys.executable, "-m", module, *arguments],
        env=dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                 WORLD_SIZE=str(world), OMP_NUM_THREADS="1", GLOO_SOCKET_IFNAME="lo",
                 **(environment or {})),
        stdout=outputs[rank], stderr=subprocess.PIPE, text=True) for rank in range(world)]
    answers = []
    for process, output in zip(processes, outputs):
        try:
            _nothing, errors = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            for other in processes:
                other.kill()
            raise
        with output:
            output.seek(0)
            lines = [line for line in output.read().splitlines() if line.startswith("{")]
        assert lines, "a rank printed no answer: %s" % errors[-2000:]
        answers.append(json.loads(lines[-1]))
    return answers
