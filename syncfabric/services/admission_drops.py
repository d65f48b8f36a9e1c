"""Counting what the switches' admission dropped (no Ryu).

Table 0 of every switch drops datagrams sent to a plan's (a job's) UDP ports by a host
that is not one of its members, or with an address that is not the sender's own
(openflow/builders.py, decisions/plan_admission.py). The switch counts the packets
of each such flow; this service asks for those counts and adds what is new to
`syncfabric_admission_drops_total`, by switch. A flow's count starts again when it is
installed again, so a count lower than the last one seen is all new.
"""

from syncfabric.openflow import builders as of


class AdmissionDrops:
    def __init__(self, fabric, metrics):
        self.fabric, self.metrics = fabric, metrics
        self._asked = {}     # dpid -> the xid of its last request
        self._counted = {}   # dpid -> {(cookie, match): packets counted so far}
        self._fresh = {}     # dpid -> {(cookie, match): packets} of the reply being read

    def requests(self):
        """{datapath: [request]}: ask every connected switch of the fabric for its counts."""
        view, asks = self.fabric.view, {}
        for datapath in self.fabric.connected():
            if view is None or datapath.id not in view.switch_by_dpid:
                continue
            request = of.admission_drop_requests(datapath)
            self._asked[datapath.id] = datapath.set_xid(request)
            asks[datapath] = [request]
        return asks

    def reply(self, datapath, xid, flow_stats, more):
        """A reply (part) to requests(); others (e.g. a switch's reading) are ignored."""
        if self._asked.get(datapath.id) != xid or self.fabric.view is None:
            return
        switch = self.fabric.view.switch_by_dpid.get(datapath.id)
        fresh = self._fresh.setdefault(datapath.id, {})
        fresh.update({(s.cookie, tuple(sorted(s.match.items()))): s.packet_count
                      for s in flow_stats if s.table_id == of.TABLE_ADMISSION
                      and s.priority == of.PRIORITY_NOT_MEMBER})
        if more or switch is None:
            return
        self.metrics.admission_drops.labels(switch).inc(
            new_counts(self._counted.get(datapath.id, {}), fresh))
        self._counted[datapath.id] = self._fresh.pop(datapath.id)
        del self._asked[datapath.id]


def new_counts(counted, fresh):
    """What was counted since the counts `counted` ({key: count}, packets or bytes): a
    count lower than before is of a flow or meter installed again, and all of it is
    new."""
    new = 0
    for key, packets in fresh.items():
        before = counted.get(key, 0)
        new += packets - before if packets >= before else packets
    return new
