"""The long-lived daemon of an aggregator host, or of a host that holds PS shards for
jobs it does not work in: it serves every job the controller assigns to this host, and
keeps running between jobs.

    python -m syncfabric.aggregator --controller http://10.0.0.254:8080 [--name agg-spine1]
        [--cores 2]

A thread asks the controller for the jobs (GET /jobs) every POLL_S; the daemon opens a
socket on this host's address and the job's port for every part it has in a job (a
shard, an aggregation: job_roles), and closes them when the job is gone. With --cores
N, each part runs on N cores: N sockets on its port, one per serving loop (one thread
each, serving_loop), each summing its share of the fragments (core_split). While the
controller is away (or restoring its jobs after a restart), it serves the jobs it had:
the switches keep their flows, so the rounds go on. A job's new generation that moves
only its rates (other jobs came or went) keeps its parts and their sums in flight, at
the new rates from the job's effective round (rate_following); one that moved its
parts is served anew. A job's window, and what it may borrow, move without a new
generation (interleaving): its sums borrow as the latest list says. Without
--name, the host is the fabric's host whose address is this machine's. SIGUSR1 logs
each job's counts so far: datagrams taken, dropped as not the job's (and of those, how
many named a round outside the window), and dropped by the data path as truncated or
oversized (docs/security.md).
"""

import argparse
import errno
import functools
import logging
import os
import queue
import signal
import socket
import sys
import threading
from urllib.parse import quote

from syncfabric.hosts.cli import ArgumentParser
from syncfabric.hosts.transport.controller_client import ControllerClient, ControllerHttpError
from syncfabric.hosts.jobs.core_split import CoreShare, core_sockets
from syncfabric.hosts.jobs.job_layout import JobError, JobLayout
from syncfabric.hosts.jobs.job_roles import AggregatorNode, ShardNode
from syncfabric.hosts.jobs.rate_following import RateSchedule, same_shape
from syncfabric.hosts.jobs.serving_loop import ServingLoop

LOG = logging.getLogger("syncfabric.aggregator")
POLL_S = 0.5
FORGET_WAIT_S = 2.0   # a loop closes a job's sockets between two batches


class JobDaemon:
    def __init__(self, client, name, poll_s=POLL_S, cores=1):
        self.client, self.name, self.poll_s = client, name, poll_s
        self.served = {}   # job id -> (generation, [[a part's node per core], ...])
        self.schedules = {}   # job id -> its layouts by round (rate_following.RateSchedule)
        self.loops = [ServingLoop(core, cores) for core in range(cores)]
        self.reports = queue.Queue()   # GET /jobs answers, and None once stop() was called
        self.stopping = threading.Event()

    def serve(self):
        """Serve until stop(): the serving loops take the datagrams; this thread follows
        the jobs, which a thread of their own reads, so a slow controller never holds up
        the data plane."""
        reader = threading.Thread(target=self._read_jobs, name="syncfabric-jobs", daemon=True)
        reader.start()
        for loop in self.loops:
            loop.start()
        LOG.info("%s: serving the jobs of %s on %d core(s)", self.name, self.client.base_url,
                 len(self.loops))
        try:
            while not self.stopping.is_set():
                reports = self.reports.get()
                if reports is not None:
                    self.follow(reports)
        finally:
            self.stopping.set()
            for job_id in list(self.served):
                self._drop(job_id)
            for loop in self.loops:
                loop.stop()

    def stop(self):
        self.stopping.set()
        self.reports.put(None)

    def _read_jobs(self):
        unanswered = False   # the controller away or restarting: the jobs served go on
        etag = None   # of the last answer: while no job changed, the controller says 304
        while not self.stopping.is_set():
            try:
                # naming this host says it is alive: a job it serves is released if it stops
                answer, etag = self.client.get_changed("/jobs?host=%s" % quote(self.name), etag)
                if answer is not None:
                    self.reports.put(answer["jobs"])
            except (OSError, ControllerHttpError) as error:
                if not unanswered:
                    LOG.warning("%s: cannot read the jobs (%s); serving those it had, asking "
                                "again every %.1f s", self.name, error, self.poll_s)
                unanswered = True
            except Exception:   # not the controller's absence: a bug; go on serving
                LOG.exception("%s: cannot read the jobs", self.name)
            else:
                if unanswered:
                    LOG.info("%s: reading the jobs again", self.name)
                unanswered = False
            self.stopping.wait(self.poll_s)
        self.client.close()   # the connection this thread kept to the controller

    def follow(self, reports):
        """Serve the jobs in `reports` that have a part in this host; stop serving the
        others."""
        mine = {}
        for report in reports:
            try:
                layout = JobLayout(report)
            except (JobError, KeyError, TypeError) as error:
                LOG.error("%s: job %s cannot be served: %s", self.name, report.get("id"), error)
                continue
            if layout.serves(self.name):
                mine[layout.id] = layout
        for job_id in [j for j in self.served if j not in mine]:
            self._drop(job_id)
        for job_id, layout in mine.items():
            if job_id in self.served and self.served[job_id][0] != layout.generation:
                self._new_generation(layout)
            elif job_id in self.served:   # its window, or what it may borrow, moved
                self.schedules[job_id].refresh(layout)
            if job_id not in self.served:
                self._serve_job(layout)

    def _new_generation(self, layout):
        """Rates moved (other jobs came or went): the parts go on, at the new rates from
        the job's effective round; anything else moved: the job is served anew."""
        schedule = self.schedules[layout.id]
        if not same_shape(schedule.latest, layout):
            self._drop(layout.id)
            return
        schedule.follow(layout)
        self.served[layout.id] = (layout.generation, self.served[layout.id][1])
        LOG.info("%s: job %d generation %d: its new rates from round %d", self.name, layout.id,
                 layout.generation, layout.effective_round)

    def _serve_job(self, layout):
        address, cores = layout.addresses[self.name], len(self.loops)
        parts = []   # each part's node per core
        schedule = RateSchedule(layout)
        try:
            for shard in layout.shards_of(self.name):
                parts.append(self._part(core_sockets(address, shard.port, cores),
                                        functools.partial(ShardNode, layout, shard,
                                                          rates=schedule)))
            for aggregation in layout.aggregations_of(self.name):
                parts.append(self._part(core_sockets(address, aggregation.port, cores),
                                        functools.partial(AggregatorNode, layout, aggregation,
                                                          rates=schedule)))
        except OSError as error:
            for node in (node for part in parts for node in part):
                node.sock.close()
            LOG.error("%s: job %d cannot be served: %s", self.name, layout.id, error)
            return
        for loop in self.loops:
            loop.serve([part[loop.core] for part in parts])
        self.served[layout.id] = (layout.generation, parts)
        self.schedules[layout.id] = schedule
        LOG.info("%s: serving job %d (generation %d): %s", self.name, layout.id, layout.generation,
                 ", ".join(describe(part[0]) for part in parts))

    def _part(self, sockets, node):
        """A part's node on each core: node(sock, share=...) with core c's socket, each
        handing what reaches it of another core's share to that core's loop."""
        part = []

        def handoff(core, packet, source):
            self.loops[core].call(part[core].datagram, packet, source)
        cores = len(sockets)
        part += [node(sock, share=CoreShare(core, cores, handoff))
                 for core, sock in enumerate(sockets)]
        return part

    def _drop(self, job_id):
        _generation, parts = self.served.pop(job_id)
        self.schedules.pop(job_id, None)
        closing = [loop.forget([part[loop.core] for part in parts]) for loop in self.loops]
        for closed in closing:   # its ports are free again once this returns
            closed.wait(FORGET_WAIT_S)
        LOG.info("%s: job %d no longer served here (%s)", self.name, job_id, counts(parts))

    def log_counts(self):
        """Log every served job's counts so far (SIGUSR1), read while the loops run."""
        for job_id, (generation, parts) in sorted(self.served.items()):
            LOG.info("%s: job %d (generation %d): %s", self.name, job_id, generation,
                     counts(parts))


def counts(parts):
    """A job's datagram counts on this host, over its parts and cores, in words."""
    nodes = [node for part in parts for node in part]
    total = {name: sum(getattr(node, name) for node in nodes)
             for name in ("taken", "dropped", "out_of_window", "truncated", "oversized")}
    return ("%(taken)d datagrams taken, %(dropped)d dropped as not the job's (%(out_of_window)d "
            "naming a round outside the window), %(truncated)d truncated, %(oversized)d "
            "oversized" % total)


def describe(node):
    if isinstance(node, ShardNode):
        return "shard %d on port %d" % (node.shard.index, node.shard.port)
    return "aggregating for %s:%d" % node.destination


def this_host(client):
    """The fabric's host whose address this machine has (binding to it works only here)."""
    for host in client.get("/fabric/topology")["hosts"]:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            probe.bind((host["ip"], 0))
            return host["name"]
        except OSError as error:
            if error.errno != errno.EADDRNOTAVAIL:
                raise
        finally:
            probe.close()
    raise SystemExit("none of the fabric's hosts has an address of this machine: pass --name")


def parse_args(argv):
    parser = ArgumentParser(prog="python -m syncfabric.aggregator",
                            description="Serve the jobs the controller gives this host: sum "
                                        "their gradients (an aggregator) or hold their PS "
                                        "shards, and keep running between jobs.")
    parser.add_argument("--controller", required=True,
                        help="the controller's REST API, e.g. http://10.0.0.254:8080 (a token "
                             "in SYNCFABRIC_REST_TOKEN is sent if set)")
    parser.add_argument("--name", help="this host's name in the fabric description (default: "
                                       "the host whose address this machine has)")
    parser.add_argument("--poll-s", type=float, default=POLL_S,
                        help="how often to read the jobs (default %(default)s)")
    parser.add_argument("--cores", type=positive_cores, default=1,
                        help="run each part on this many cores, each summing its share of "
                             "the fragments on a socket of its own (default %(default)s; at "
                             "most the CPUs this process may use)")
    return parser.parse_args(argv)


def positive_cores(text):
    usable = len(os.sched_getaffinity(0))
    if not text.isdigit() or not 1 <= int(text) <= usable:
        raise argparse.ArgumentTypeError("%s: give a whole number of cores from 1 to %d (the "
                                         "CPUs this process may use)" % (text, usable))
    return int(text)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    client = ControllerClient(args.controller, retry_s=30.0)
    daemon = JobDaemon(client, args.name or this_host(client), args.poll_s, args.cores)
    signal.signal(signal.SIGTERM, lambda _signal, _frame: daemon.stop())
    signal.signal(signal.SIGUSR1, lambda _signal, _frame: daemon.log_counts())
    try:
        daemon.serve()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
