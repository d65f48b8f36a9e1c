"""Counts asked of every switch of the fabric and gathered from their replies (no Ryu):
what admission_drops.py and class_counters.py share.

A switch answers a statistics request in parts; the counts of one request are complete
with its last part. A counter (a flow's, a meter's) starts again from nothing when its
flow or meter is installed again, so what is new since the last complete reply is
worked out per key (new_counts).
"""


class SwitchCounts:
    """Requests of each kind `what` to every connected switch, their replies' parts
    gathered by (switch, what) until the last, then handed over with the counts of the
    reply before."""

    def __init__(self, fabric):
        self.fabric = fabric
        self._asked = {}     # (dpid, what) -> the xid of its last request
        self._counted = {}   # (dpid, what) -> {key: count} of the last complete reply
        self._fresh = {}     # (dpid, what) -> {key: count} of the reply being read

    def ask(self, requests_of):
        """{datapath: [request]}: requests_of(datapath) -> {what: request} for every
        connected switch of the fabric, each request's xid kept to know its reply."""
        view, asks = self.fabric.view, {}
        for datapath in self.fabric.connected():
            if view is None or datapath.id not in view.switch_by_dpid:
                continue
            requests = requests_of(datapath)
            for what, request in requests.items():
                self._asked[datapath.id, what] = datapath.set_xid(request)
            asks[datapath] = list(requests.values())
        return asks

    def take(self, datapath, xid, what, more, counts):
        """Gather a reply's part ({key: count}) to the last request of kind `what`; once
        it is the last part: (switch name, counts of the reply before, counts now), else
        None (a part, a reply to another request, a switch the fabric does not know)."""
        key = datapath.id, what
        if self._asked.get(key) != xid or self.fabric.view is None:
            return None
        self._fresh.setdefault(key, {}).update(counts)
        switch = self.fabric.view.switch_by_dpid.get(datapath.id)
        if more or switch is None:
            return None
        fresh, counted = self._fresh.pop(key), self._counted.get(key, {})
        self._counted[key] = fresh
        del self._asked[key]
        return switch, counted, fresh


def new_counts(counted, fresh):
    """What was counted since the counts `counted` ({key: count}, packets or bytes): a
    count lower than before is of a flow or meter installed again, and all of it is
    new."""
    new = 0
    for key, count in fresh.items():
        before = counted.get(key, 0)
        new += count - before if count >= before else count
    return new
