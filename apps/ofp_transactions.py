"""Send batches of OpenFlow messages and learn, from barriers, when switches have
applied them and which they rejected.

A batch spans several switches; it is done when every switch answered its
barrier. Errors that name a batch message's xid are collected on the batch.
An app owns one tracker and routes its BarrierReply and Error events to it.
"""

from ryu.lib import hub

from apps.openflow_builders import barrier_request


class Batch:
    def __init__(self, on_done):
        self.errors = []            # (dpid, error message)
        self._waiting = set()       # (dpid, barrier xid)
        self._done = hub.Event()
        self._on_done = on_done

    def wait(self, timeout_s):
        """True if every switch confirmed within timeout_s."""
        return self._done.wait(timeout_s)


class BarrierTracker:
    def __init__(self):
        self._batch_of_xid = {}     # (dpid, xid) -> Batch, for every message sent

    def send(self, messages_by_datapath, on_done=None):
        """Send each datapath its messages then a barrier; returns the Batch."""
        batch = Batch(on_done)
        for datapath, messages in messages_by_datapath.items():
            barrier = barrier_request(datapath)
            for message in list(messages) + [barrier]:
                datapath.set_xid(message)
                self._batch_of_xid[datapath.id, message.xid] = batch
                datapath.send_msg(message)
            batch._waiting.add((datapath.id, barrier.xid))
        if not batch._waiting:
            self._finish(batch)
        return batch

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

    def abandon(self, batch):
        """Stop tracking a batch that will not complete (e.g. a switch went away)."""
        for key in [k for k, b in self._batch_of_xid.items() if b is batch]:
            del self._batch_of_xid[key]

    def _finish(self, batch):
        self.abandon(batch)
        batch._done.set()
        if batch._on_done is not None:
            batch._on_done(batch)
