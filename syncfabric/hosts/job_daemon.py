"""The long-lived daemon of an aggregator host, or of a host that holds PS shards for
jobs it does not work in: it serves every job the controller assigns to this host, and
keeps running between jobs.

    python -m syncfabric.aggregator --controller http://10.0.0.254:8080 [--name agg-spine1]

A thread asks the controller for the jobs (GET /jobs) every POLL_S; the daemon opens a
socket on this host's address and the job's port for every part it has in a job (a
shard, an aggregation: job_roles), and closes them when the job is gone. While the
controller is away (or restoring its jobs after a restart), it serves the jobs it had:
the switches keep their flows, so the rounds go on. Without
--name, the host is the fabric's host whose address is this machine's.
"""

import errno
import logging
import queue
import selectors
import signal
import socket
import sys
import threading

from syncfabric.hosts.cli import ArgumentParser
from syncfabric.hosts.controller_client import ControllerClient, ControllerHttpError
from syncfabric.hosts.job_layout import JobError, JobLayout
from syncfabric.hosts.job_roles import AggregatorNode, ShardNode, next_due
from syncfabric.hosts.receivers import Wakeup, receiving_socket

LOG = logging.getLogger("syncfabric.aggregator")
POLL_S = 0.5


class JobDaemon:
    def __init__(self, client, name, poll_s=POLL_S):
        self.client, self.name, self.poll_s = client, name, poll_s
        self.served = {}   # job id -> (generation, [nodes])
        self.selector = selectors.DefaultSelector()
        self.reports = queue.Queue()
        self.wakeup = Wakeup()   # new reports are in, or stop() was called
        self.selector.register(self.wakeup.sock, selectors.EVENT_READ, None)
        self.stopping = threading.Event()

    def serve(self):
        """Serve until stop(); the jobs are read by a thread of their own, so a slow
        controller never holds up the data plane."""
        reader = threading.Thread(target=self._read_jobs, name="syncfabric-jobs", daemon=True)
        reader.start()
        LOG.info("%s: serving the jobs of %s", self.name, self.client.base_url)
        try:
            while not self.stopping.is_set():
                self._pump()
        finally:
            self.stopping.set()
            for job_id in list(self.served):
                self._drop(job_id)
            self.selector.close()
            self.wakeup.close()

    def stop(self):
        self.stopping.set()
        self.wakeup.wake()

    def _read_jobs(self):
        unanswered = False   # the controller away or restarting: the jobs served go on
        etag = None   # of the last answer: while no job changed, the controller says 304
        while not self.stopping.is_set():
            try:
                answer, etag = self.client.get_changed("/jobs", etag)
                if answer is not None:
                    self.reports.put(answer["jobs"])
                    self.wakeup.wake()
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

    def _pump(self):
        nodes = [node for _generation, parts in self.served.values() for node in parts]
        for key, _events in self.selector.select(next_due(n.sums_out for n in nodes)):
            if key.data is None:
                self._woken()
            else:
                key.data.take()
        for node in nodes:
            node.sums_out.send_due()

    def _woken(self):
        self.wakeup.clear()
        while not self.reports.empty():
            self.follow(self.reports.get())

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
        for job_id in [j for j in self.served if j not in mine
                       or self.served[j][0] != mine[j].generation]:
            self._drop(job_id)
        for job_id, layout in mine.items():
            if job_id not in self.served:
                self._serve_job(layout)

    def _serve_job(self, layout):
        address = layout.addresses[self.name]
        nodes = []
        try:
            for shard in layout.shards_of(self.name):
                nodes.append(ShardNode(layout, shard, receiving_socket(address, shard.port,
                                                                       reuse=False)))
            for aggregation in layout.aggregations_of(self.name):
                nodes.append(AggregatorNode(layout, aggregation,
                                            receiving_socket(address, aggregation.port, reuse=False)))
        except OSError as error:
            for node in nodes:
                node.sock.close()
            LOG.error("%s: job %d cannot be served: %s", self.name, layout.id, error)
            return
        for node in nodes:
            self.selector.register(node.sock, selectors.EVENT_READ, node)
        self.served[layout.id] = (layout.generation, nodes)
        LOG.info("%s: serving job %d (generation %d): %s", self.name, layout.id, layout.generation,
                 ", ".join(describe(node) for node in nodes))

    def _drop(self, job_id):
        _generation, nodes = self.served.pop(job_id)
        for node in nodes:
            self.selector.unregister(node.sock)
            node.sock.close()
        LOG.info("%s: job %d no longer served here (%d datagrams dropped as not the job's)",
                 self.name, job_id, sum(node.dropped for node in nodes))


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
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    client = ControllerClient(args.controller, retry_s=30.0)
    daemon = JobDaemon(client, args.name or this_host(client), args.poll_s)
    signal.signal(signal.SIGTERM, lambda _signal, _frame: daemon.stop())
    try:
        daemon.serve()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
