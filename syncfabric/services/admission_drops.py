"""Counting what the switches' admission dropped (no Ryu).

Table 0 of every switch drops datagrams sent to a plan's (a job's) UDP ports by a host
that is not one of its members, or with an address that is not the sender's own
(openflow/builders.py, decisions/plan_admission.py). The switch counts the packets
of each such flow; this service asks for those counts and adds what is new to
`syncfabric_admission_drops_total`, by switch (switch_counts.py).
"""

from syncfabric.openflow import builders as of
from syncfabric.services.switch_counts import SwitchCounts, new_counts

ADMISSION = "admission"   # the one kind of request this service makes


class AdmissionDrops:
    def __init__(self, fabric, metrics):
        self.metrics = metrics
        self.counts = SwitchCounts(fabric)

    def requests(self):
        """{datapath: [request]}: ask every connected switch of the fabric for its counts."""
        return self.counts.ask(lambda datapath: {
            ADMISSION: of.admission_drop_requests(datapath)})

    def reply(self, datapath, xid, flow_stats, more):
        """A reply (part) to requests(); others (e.g. a switch's reading) are ignored."""
        complete = self.counts.take(datapath, xid, ADMISSION, more, {
            (s.cookie, tuple(sorted(s.match.items()))): s.packet_count
            for s in flow_stats if s.table_id == of.TABLE_ADMISSION
            and s.priority == of.PRIORITY_NOT_MEMBER})
        if complete is not None:
            switch, counted, fresh = complete
            self.metrics.admission_drops.labels(switch).inc(new_counts(counted, fresh))
