"""A worker's side of a job's streaming rounds, as a library call on any Linux host:

    with FabricJob.create("http://controller:8080", workers=[...], model_bytes=n) as job:
        worker = FabricWorker(job, "h1")
        worker.wait_served()                          # its daemons and peers answer
        total = worker.allreduce(values)              # float32, any number of them
        future = worker.allreduce_async(values)       # many rounds in flight
        start_at = worker.next_window()               # interleaved: when the next may start

Each call takes the next floats of the job's rounds, a round (n / 4 floats) at a time
when its values are that long (every worker calls in the same order, as with any
collective; docs/jobs.md, "The host side"). This worker's fragments go where the job
says (its aggregator or the shard's host, paced at the planned rates); the sums come
back on the shards' trees (a scatter job's stay in their shards' hosts: a call's
result holds only this worker's own shards' sums, docs/jobs.md). A shard held in this
worker's own host is summed here (job_roles.ShardNode). Repairs are asked of the shards (job_roles) for what was given,
whole round or not; a round that makes no progress for ROUND_FAIL_S fails with an error
naming the host at fault, and so do the rounds after it, unless all it waits for is a
worker that has not joined it yet: a late rank, waited for as Gloo waits
(round_stalls.py).
"""

import logging
import selectors
import socket
import threading
import time
from concurrent.futures import Future

import numpy as np

from syncfabric.hosts.transport.controller_client import ADMISSION_TIMEOUT_S, ControllerClient
from syncfabric.hosts.datapath import datapath
from syncfabric.hosts.jobs.call_stream import CallStream, SubmittedPieces, finished, joined
from syncfabric.hosts.jobs.job_layout import JobError, JobLayout
from syncfabric.hosts.jobs.job_lease import LEASE_S, LeaseKeeper
from syncfabric.hosts.packets.control_messages import control_message, missing_pairs, whole
from syncfabric.hosts.jobs.job_roles import FEWEST_KEPT_ROUNDS, wait_until_served
from syncfabric.hosts.jobs.own_shards import SHARD_LINGER_S, OwnShards
from syncfabric.hosts.jobs.phase_windows import WorkerCadence
from syncfabric.hosts.transport.paced_sender import next_due
from syncfabric.hosts.jobs.rate_following import JobFollower, RateSchedule
from syncfabric.hosts.jobs.round_stalls import ROUND_FAIL_S, round_fail_s, stalled
from syncfabric.hosts.transport.receivers import Wakeup
from syncfabric.hosts.jobs.worker_rounds import OpenRounds, ReturnedSums, RoundFilling
from syncfabric.hosts.jobs.worker_sends import WorkerSends

LOG = logging.getLogger("syncfabric.hosts")
REPAIR_QUIET_S = 0.1    # a round still missing returns this long asks their shards again
SERVED_WAIT_S = 10.0    # how long a worker waits for its summing nodes to answer hello
# a round begins once every round this many before it is back: a summing node keeps at
# least FEWEST_KEPT_ROUNDS, so the oldest round another worker may still ask it to
# repair is one it keeps, however many rounds one call spans
ROUNDS_IN_FLIGHT = FEWEST_KEPT_ROUNDS - 1
# result arrays made when the worker starts (warm_arrays): the one a round fills and the
# one its caller still holds from the round before
RESULTS_READY = 2


def job_request(workers, model_bytes, **options):
    """POST /jobs's body: with a lease of LEASE_S unless options name one (None: none)."""
    return dict({"ttl_s": LEASE_S}, **options, workers=list(workers), model_bytes=model_bytes)


class FabricJob:
    """A job of the controller: created here (released when this ends: use it as a
    context manager; its lease kept meanwhile) or attached to by id, e.g. by the other
    workers."""

    def __init__(self, client, report, owned):
        self.client, self.report, self.owned = client, report, owned
        self.lease = (LeaseKeeper(client, self.id, report["ttl_s"])
                      if owned and report.get("ttl_s") is not None else None)

    @classmethod
    def create(cls, controller, workers, model_bytes, **options):
        """POST /jobs; options: shards, placement, aggregation, mtu, ttl_s (default
        LEASE_S; None: no lease, the job stays until DELETEd)."""
        client = ControllerClient(controller, timeout_s=ADMISSION_TIMEOUT_S)
        return cls(client, client.request("POST", "/jobs", job_request(workers, model_bytes,
                                                                       **options)), True)

    @classmethod
    def attach(cls, controller, job_id):
        """The job `job_id` (a whole number, or its text as a command line gives it)."""
        try:
            number = int(job_id)
        except (TypeError, ValueError):
            raise JobError("a job's id is a whole number (POST /jobs answers it), not %r"
                           % (job_id,)) from None
        client = ControllerClient(controller)
        return cls(client, client.get("/jobs/%d" % number), False)

    @property
    def id(self):
        return self.report["id"]

    def release(self):
        if self.lease is not None:
            self.lease.stop()
            self.lease = None
        if self.owned:
            self.owned = False
            self.client.request("DELETE", "/jobs/%d" % self.id)

    def __enter__(self):
        return self

    def __exit__(self, *_exception):
        self.release()


class FabricWorker:
    """One worker's rounds of a job (module doc): sockets, its host's shards, an I/O thread
    that sends, receives, repairs and completes the Futures; streams paced at rate_fraction
    of the planned rates, the reservations (docs/streaming-round.md). wait_served() first."""

    def __init__(self, job, name, rate_fraction=1.0, path=None):
        report = job.report if isinstance(job, FabricJob) else job
        self.layout = layout = JobLayout(report)
        self.path = path or datapath()
        if name not in layout.bit:
            raise JobError("%s is not a worker of job %d (its workers: %s)"
                           % (name, layout.id, ", ".join(layout.workers)))
        self.name, self.bit, self.rate_fraction = name, layout.bit[name], rate_fraction
        self.rates = RateSchedule(layout)   # its layouts by round, as its rates move
        self.begun = 0                      # the round it began last
        data_ip = layout.addresses[name]
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((data_ip, 0))
        self.sock.setblocking(False)
        self.selector = selectors.DefaultSelector()
        # the summing nodes' answers: hellos (self.ready) and repair requests
        self.selector.register(self.sock, selectors.EVENT_READ,
                               lambda: self.sends.take_answers(self.ready))
        self.own = OwnShards(layout, name, self.path, self.rates, self._own_sum)
        self.own.register(self.selector)
        self.rounds = OpenRounds(layout, ROUNDS_IN_FLIGHT, RESULTS_READY,   # in flight
                                 layout.owed_to(name))
        for returned in ReturnedSums.every_one_heard_by(layout, name, data_ip, self.rounds,
                                                        self.path):
            self.selector.register(returned.sock, selectors.EVENT_READ, returned.take)
        self.wakeup = Wakeup()   # a round submitted, or close() called
        self.selector.register(self.wakeup.sock, selectors.EVENT_READ, self.wakeup.clear)
        self.sends = WorkerSends(layout, name, self.sock, self.rounds, rate_fraction, self.path,
                                 self.rates)
        self.submitted = SubmittedPieces(ROUNDS_IN_FLIGHT)
        self.filling = RoundFilling(self.layout)
        self.stream = CallStream(layout, self.filling)   # where allreduce_async's calls go
        self.stats, self.ready = {}, set()   # round -> Round.stats; nodes that said ready
        self.failure, self.closing, self.closing_at = None, False, None
        self.thread = threading.Thread(target=self._serve, name="syncfabric-worker-%s" % name,
                                       daemon=True)
        self.thread.start()
        # a job of the controller: its rates may move as other jobs come and go, and
        # under interleaving it has a window, planned from how long its rounds take
        self.cadence = WorkerCadence(report)
        self.follower = (JobFollower(job.client, name, self.rates, lambda: self.begun,
                                     self.cadence.window,
                                     lambda: self.cadence.query(self.sends.borrowing, self.rounds))
                         if isinstance(job, FabricJob) else None)

    # --- the API ----------------------------------------------------------------

    def allreduce_async(self, values, start_at=None):
        """A Future of the sum of `values` (float32s, any number) over every worker: the
        next floats of the job's rounds, from the next fragment's edge of the round being
        filled (its first, or a new round), the rest of their last fragment zeros. A call
        of model_bytes / 4 floats at a round's edge is that whole round; a longer one, or
        one the round being filled has too little room for, goes on into the next rounds.
        Its datagrams are made now and leave from start_at (time.time(); a moment all
        share). The Future ends once the zeros are back too: the stats of a round the call
        ends are filed by then. As with any asynchronous collective, `values` must not
        change until the Future ends: the worker reads float32 values where they are, to
        send them again (a scatter job's worker copies them: it may send its parts of the
        other shards again after the Future ends, until their hosts confirm them)."""
        values = np.ascontiguousarray(values, dtype=np.float32).ravel()
        if not len(values):
            return finished(values)
        with self.stream.lock:
            parts = [(self.reduce_part(start, piece, start_at), own)
                     for start, piece, own in self.stream.pieces(values)]
        return joined(parts)

    def allreduce(self, values, timeout=None):
        return self.allreduce_async(values).result(timeout)

    def next_window(self):
        """When the next round may start (time.time()), for allreduce_async's start_at:
        its window's under interleaving (phase_windows.py), None (at once) otherwise.
        Asking ends the caller's compute, as the controller learns it."""
        return self.cadence.next_start()

    def planned_window(self):
        """The job's window the last next_window() planned by (phase_windows.JobWindow),
        None without one: the latest report may have moved it since."""
        return self.cadence.window.planned_by

    def wait_served(self, timeout_s=SERVED_WAIT_S):
        """Once every summing node it sends to answers hello; JobError: the silent hosts."""
        wait_until_served(self, timeout_s)

    def reduce_part(self, start, values, start_at=None):
        """values[i] is float start + i of the round being filled (the next round once the
        last one has every float); a Future of those floats' sum over every worker. Each
        fragment leaves once its floats are in (DDP's buckets are on the wire while the
        rest is computed). Every worker gives the same pieces in the same order (start_at:
        as allreduce_async's; `values` as there)."""
        values = np.ascontiguousarray(values, dtype=np.float32).ravel()
        number, whole, complete = self.filling.take(start, start + len(values))
        if start == 0:
            self.cadence.timing.called(number, start_at, time.time())
        future = Future()
        self.submitted.put((number, start, values, future, whole, complete, start_at))
        self.wakeup.wake()
        return future

    def close(self):
        """Stop, once this host's shards have served the other workers (SHARD_LINGER_S)."""
        if self.follower is not None:
            self.follower.stop()
        self.closing_at = time.monotonic()
        self.closing = True
        self.wakeup.wake()
        self.thread.join()
        for key in list(self.selector.get_map().values()):
            key.fileobj.close()
        self.selector.close()
        self.wakeup.close()

    # --- the I/O thread ---------------------------------------------------------

    def _serve(self):
        while not self.closing or self.own.lingering(self.closing_at, ROUND_FAIL_S):
            try:
                self._pump(SHARD_LINGER_S / 4 if self.closing else None)
                for piece in self.submitted.ready(self.rounds):
                    self._contribute(*piece)
            except Exception as error:   # keep serving; the rounds in flight fail with it
                LOG.exception("worker %s: round handling failed", self.name)
                self._fail(JobError("worker %s: %s" % (self.name, error)))

    def _pump(self, seconds):
        """Receive for `seconds` at most (None: until an event or a timer), send, check."""
        due = next_due([self.sends.outbox] + self.own.senders())
        limit = min([x for x in (seconds, due) if x is not None]
                    + [REPAIR_QUIET_S / 2] * self.rounds.any_given(), default=None)
        for key, _events in self.selector.select(limit):
            key.data()
        self.sends.outbox.send_due()
        self.own.send_due()
        self._check_rounds()

    def _between_sends(self, seconds):
        """send_streams' idle: sleep until a datagram of ours is due, then take what came
        meanwhile (a wakeup per datagram sent, not one more per datagram received)."""
        due = next_due(self.own.senders())
        time.sleep(seconds if due is None else min(seconds, due))
        self._pump(0)

    def _contribute(self, number, start, values, future, whole, complete, start_at):
        if self.failure is not None:
            future.set_exception(self.failure)
            return
        self.begun = max(self.begun, number)
        self.rounds.open_after(self.begun)
        current = self.rounds.opened(number)
        current.contribute(start, values, future, whole)
        # in its window (start_at), a round sends at its rate alone from the start,
        # as this host's shards and the job's aggregators do (JobLayout.window_factor)
        rate_factor = None if start_at is None else self.rates.at(number).window_factor
        current.sending = True   # a repair asked mid-pass would send it twice
        try:
            self.sends.first_pass(current, whole, self.own.by_index,
                                  start_at, self._between_sends,
                                  self.cadence.window.borrow_until(start_at), rate_factor)
        finally:
            current.sending = False
        current.sent = complete
        self._check_rounds()   # what came back mid-pass waited for the pass to end

    def _own_sum(self, number, index, sums):
        current = self.rounds.get(number)
        if current is not None:
            current.place(index, sums.values_of(index))

    def _check_rounds(self):
        now = time.monotonic()
        self.rounds.hold_behind_the_oldest(now)   # only the oldest asks again, or fails
        for number, current in sorted(self.rounds.items()):
            if current.sent and current.have.all():   # stats filed before its last Future ends
                self.stats[number] = self.rounds.pop(number).stats
                self.cadence.timing.back(number, time.time())
            # mid-pass, a round's Futures wait: its stats are filed when the pass ends
            for start, stop, future in [] if current.sending else current.summed_parts():
                future.set_result(current.result[start:stop])   # each float placed once
            waiting = number in self.rounds and current.awaiting()   # given, not back
            fail_s = round_fail_s(self.rates.at(number))
            failure = waiting and stalled(self.layout, self.own.nodes, current, now, fail_s)
            if failure:
                self._fail(failure)
            elif waiting and current.repair_due(now, REPAIR_QUIET_S, fail_s):
                for packet, address in current.repair_requests(self.name, now):
                    self.sock.sendto(packet, address)

    def _fail(self, error):
        LOG.error("%s", error)
        self.failure = error
        for number in list(self.rounds):
            for _start, _stop, future in self.rounds.pop(number).parts:
                future.set_exception(error)
