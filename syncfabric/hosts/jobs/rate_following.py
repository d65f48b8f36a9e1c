"""How a job's hosts follow new rates between rounds, with no round lost and none summed
under two plans.

When other jobs come or go, the controller plans a live job's rates again: the same
shards, aggregators and fragments, every stream's rate scaled (services/tenants.py).
It raises the job's generation and names the round the new rates hold from
(`effective_round`). Every host keeps the job's layouts by that round (RateSchedule)
and paces each datagram by the layout of the round it belongs to, so all hosts change
rates at the same round whenever each read the report; what they sum is unchanged.
Under interleaving a job's window, and what it may borrow into aggregators, move
without a new generation: hosts take them from every report that changed (refresh).
A generation whose layout differs in more than rates (its parts moved around a fault)
is not a rate change (same_shape): the daemon serves the job anew, as before.

A worker reads its job twice a second (JobFollower), naming the round it began and
the round all its rounds are back through, so the controller knows from which round
new rates can hold and when it no longer sends at the old ones, and how long its rounds
and compute take; it says when it ends. Its window under interleaving is taken from every
read (phase_windows.py).
"""

import logging
import threading

from syncfabric.hosts.transport.controller_client import ControllerHttpError
from syncfabric.hosts.jobs.job_layout import JobError, JobLayout

LOG = logging.getLogger("syncfabric.hosts")
FOLLOW_POLL_S = 0.5
FAREWELL_TIMEOUT_S = 1.0   # how long a worker that ends waits to say so
KEPT_LAYOUTS = 4   # a schedule keeps this many (rounds in flight use at most two)


def shape(layout):
    """Everything of a layout but its rates: what its hosts sum, where and from whom."""
    return (layout.id, layout.workers, layout.count, layout.per_fragment,
            [(s.index, s.host, s.address, s.port, s.first, s.last, s.returns)
             for s in layout.shards],
            {w: [(leg.shard, leg.host, leg.address, leg.port, leg.first, leg.last)
                 for leg in legs] for w, legs in layout.legs.items()},
            [(a.host, a.shard, a.port, a.workers) for a in layout.aggregations])


def same_shape(old, new):
    """Whether `new` differs from `old` in rates only (so it can take effect mid-job)."""
    return shape(old) == shape(new)


class RateSchedule:
    """A job's layouts by the round they hold from: at(number) is the layout whose
    effective round is the latest not after `number`."""

    def __init__(self, layout):
        self.steps = [(0, layout)]   # (effective round, layout), in order

    @property
    def latest(self):
        return self.steps[-1][1]

    def follow(self, layout):
        """Take a new generation of the job's rates, from its effective round on."""
        first = layout.effective_round
        steps = [s for s in self.steps if s[0] < first] + [(first, layout)]
        self.steps = steps[-KEPT_LAYOUTS:]   # replaced whole: readers in other threads

    def refresh(self, layout):
        """Take the latest generation's report again, read after its window or what it
        may borrow into aggregators moved (interleaving planned, jobs beside it given
        windows): what its rounds borrow follows it from now on. Anything else of a
        generation never moves; a report of another generation is follow()'s."""
        if layout.generation == self.latest.generation and same_shape(self.latest, layout):
            self.steps = self.steps[:-1] + [(self.steps[-1][0], layout)]

    def at(self, number):
        chosen = self.steps[0][1]
        for first, layout in self.steps:
            if first <= number:
                chosen = layout
        return chosen


class JobFollower:
    """A worker's reading of its job (GET /jobs/<id>?worker=&round=&back=&comm_s=
    &compute_s=&borrowed_mbps=, with its ETag) every FOLLOW_POLL_S: a new generation of
    rates goes into `schedule`, the job's window into `window` (phase_windows.PhaseWindow). begun(): the round the
    worker began last; figures(): the rest of the query, what it says of its rounds
    (FabricWorker.figures_query)."""

    def __init__(self, client, name, schedule, begun, window, figures):
        self.client, self.name, self.schedule, self.begun = client, name, schedule, begun
        self.window, self.figures = window, figures
        self.stopping = threading.Event()
        self.etag, self.warned = None, None
        self.thread = threading.Thread(target=self._run, name="syncfabric-follow-%s" % name,
                                       daemon=True)
        self.thread.start()

    def stop(self):
        """Stop reading, and say this worker ends (done=1): the controller then need not
        wait for it to pass the effective round of another generation (a shrink for
        another job's admission). Said once, briefly: a controller away is not waited for."""
        self.stopping.set()
        self.thread.join()
        try:
            self.client.briefly(FAREWELL_TIMEOUT_S).request(
                "GET", "/jobs/%d?worker=%s&round=%d&done=1" % (self.schedule.latest.id,
                                                               self.name, self.begun()))
        except (OSError, ControllerHttpError) as error:
            LOG.debug("worker %s: could not say it ends (%s)", self.name, error)

    def _run(self):
        while not self.stopping.wait(FOLLOW_POLL_S):
            try:
                self.read_once()
            except (OSError, ControllerHttpError) as error:   # the controller away: go on
                LOG.debug("worker %s: cannot read its job (%s)", self.name, error)
            except Exception:   # a bug: say so, and keep the rounds going
                LOG.exception("worker %s: reading its job failed", self.name)
        self.client.close()   # the connection this thread kept to the controller

    def read_once(self):
        latest = self.schedule.latest
        report, self.etag = self.client.get_changed(
            "/jobs/%d?worker=%s&round=%d%s" % (latest.id, self.name, self.begun(),
                                               self.figures()), self.etag)
        if report is None:
            return
        self.window.follow(report)
        try:
            layout = JobLayout(report)
        except (JobError, KeyError, TypeError) as error:
            LOG.error("worker %s: job %d's report cannot be followed: %s", self.name,
                      latest.id, error)
            return
        if layout.generation == latest.generation:
            self.schedule.refresh(layout)
        elif same_shape(latest, layout):
            self.schedule.follow(layout)
            LOG.info("worker %s: job %d generation %d: its new rates from round %d", self.name,
                     layout.id, layout.generation, layout.effective_round)
        elif self.warned != layout.generation:
            self.warned = layout.generation
            LOG.warning("worker %s: job %d's generation %d moved its parts (not only its "
                        "rates); this worker keeps the layout it has: create it again",
                        self.name, layout.id, layout.generation)
