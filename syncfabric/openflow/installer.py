"""Where OpenFlow messages become confirmed switch state: one installer for every app.

A batch sends each switch its messages and then a barrier; it is confirmed when every
switch answered its barrier and rejected none of the messages. The fabric app routes
barrier replies, errors and disconnections here once, for all apps. A switch that
disconnects fails its pending batches at once (as ryu.app.ofctl.service's _handle_dead
does), instead of leaving their callers to a timeout. It waits with the event and sleep
of the caller's threads (Ryu's hub in the controller), so it needs no Ryu itself.
"""

import threading
import time
from collections import Counter

from syncfabric.errors import InstallFailed
from syncfabric.openflow.builders import barrier_request

CONFIRM_TIMEOUT_S = 5.0
DRAIN_S = 0.3   # for packets already on an old path to leave it before its rules go


class Batch:
    def __init__(self, on_done, done_event):
        self.errors = []            # (dpid, error message)
        self.failure = None         # why it cannot be confirmed, once it cannot
        self.sent_at = time.monotonic()
        self._waiting = set()       # (dpid, barrier xid)
        self._done = done_event
        self._on_done = on_done

    @property
    def confirmed(self):
        return self._done.is_set() and not self.errors and self.failure is None

    def reason(self):
        """Why the batch is not confirmed, in words."""
        if self.errors:
            first = self.errors[0][1]
            return "%d switch error(s), first: type=%d code=%d" % (len(self.errors), first.type,
                                                                  first.code)
        return self.failure or "no confirmation"


class Installer:
    def __init__(self, metrics, timeout_s=CONFIRM_TIMEOUT_S, event_class=threading.Event,
                 sleep=time.sleep):
        self.metrics, self.timeout_s = metrics, timeout_s
        self._event_class, self._sleep = event_class, sleep
        self._batch_of_xid = {}     # (dpid, xid) -> Batch, for every message sent
        self._sent = Counter()      # dpid -> messages sent to it, ever
        self._draining = 0          # send_after_drain calls waiting

    def send(self, messages_by_datapath, on_done=None):
        """Send each datapath its messages then a barrier; returns the Batch. on_done(batch)
        runs once it is confirmed or failed."""
        batch = Batch(on_done, self._event_class())
        for datapath, messages in messages_by_datapath.items():
            barrier = barrier_request(datapath)
            for message in [*messages, barrier]:
                datapath.set_xid(message)
                self._batch_of_xid[datapath.id, message.xid] = batch
            batch._waiting.add((datapath.id, barrier.xid))
            self._sent[datapath.id] += len(messages)
            transmit(datapath, [*messages, barrier])
        if not batch._waiting and not batch._done.is_set():
            self._finish(batch)
        return batch

    def install(self, messages_by_datapath):
        """Send and wait for every switch's confirmation; InstallFailed(reason) if a switch
        rejected a message, disconnected or did not answer in time."""
        batch = self.send(messages_by_datapath)
        if not batch._done.wait(self.timeout_s):
            batch.failure = "no confirmation within %.0f s" % self.timeout_s
            self._finish(batch)
        if not batch.confirmed:
            raise InstallFailed(batch.reason())

    def send_after_drain(self, messages_by_datapath):
        """Send the then-break of moves (what only the old paths had) once the packets
        already on those paths can have left them: rules removed under packets still
        queued on a link drop them (on 8x8, trees moved off a reconnecting switch lost a
        median 36 ms of datagrams at once, 9 ms after a 0.3 s drain). It waits here, so
        that the caller's next move cannot be overtaken by it; meanwhile it counts as
        pending."""
        messages = {datapath: batch for datapath, batch in messages_by_datapath.items() if batch}
        if not messages:
            return
        self._draining += 1
        try:
            self._sleep(DRAIN_S)
        finally:
            self._draining -= 1
        self.send(messages)

    def remove(self, messages_by_datapath):
        """Send removals and wait; True if every switch confirmed (a removal that is not
        confirmed is reported, not raised: the switch is gone, or clears on reconnect)."""
        try:
            self.install(messages_by_datapath)
        except InstallFailed:
            return False
        return True

    def error(self, msg):
        """Route an EventOFPErrorMsg's msg here; returns the Batch it belongs to, if any."""
        batch = self._batch_of_xid.get((msg.datapath.id, msg.xid))
        if batch is not None:
            batch.errors.append((msg.datapath.id, msg))
        return batch

    def barrier_reply(self, msg):
        key = (msg.datapath.id, msg.xid)
        batch = self._batch_of_xid.get(key)
        if batch is None or key not in batch._waiting:
            return
        batch._waiting.discard(key)
        if not batch._waiting:
            self._finish(batch)

    def switch_gone(self, dpid):
        """Fail every pending batch that waits for `dpid`."""
        for batch in {b for (d, _), b in self._batch_of_xid.items() if d == dpid}:
            if any(d == dpid for d, _ in batch._waiting):
                batch.failure = "switch dpid %#x disconnected" % dpid
                self._finish(batch)

    def sent_to(self, dpid):
        """How many messages were sent to the switch so far (barriers not counted)."""
        return self._sent[dpid]

    def pending(self):
        """How many batches wait for confirmation or for a drain."""
        return len(set(self._batch_of_xid.values())) + self._draining

    def _forget(self, batch):
        for key in [k for k, b in self._batch_of_xid.items() if b is batch]:
            del self._batch_of_xid[key]

    def _finish(self, batch):
        self._forget(batch)
        batch._done.set()
        self.metrics.install_seconds.labels("confirmed" if batch.confirmed else "failed").observe(
            time.monotonic() - batch.sent_at)
        if batch._on_done is not None:
            batch._on_done(batch)


def transmit(datapath, messages):
    """Send a switch its messages, in order. Ryu's Datapath takes them as one buffer
    (`send`): message by message, a batch of hundreds waited on its send queue of 16,
    a write each (a job's plan: 448 messages in 16 ms on 8x8). A switch that only
    takes messages (the tests' fake) gets them one by one."""
    send_bytes = getattr(datapath, "send", None)
    if send_bytes is None:
        for message in messages:
            datapath.send_msg(message)
        return
    for message in messages:
        message.serialize()
    send_bytes(b"".join(message.buf for message in messages))
