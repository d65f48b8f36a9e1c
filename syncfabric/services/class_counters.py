"""Counting each traffic class's bytes where jobs' streams enter the fabric (no Ryu).

A job's floor is a meter at the first switch of each of its streams, its borrowed
class a twin flow beside it (openflow/builders.metered_flows, docs/sharing.md). Every
COUNT_INTERVAL_S (apps/ina_controller.py) this service asks each switch for its
meters' counts and its borrowed twins' flow counts, and adds what is new to:

- `syncfabric_class_bytes_total{switch, class}`: bytes that entered a floor's meter
  (class guaranteed) or a borrowed twin (class borrowed);
- `syncfabric_floor_policed_bytes_total{switch}`: bytes a floor's meter dropped, sent
  unmarked above the floor.

What the switches' queues drop of the borrowed class (the class's job) is not seen by
OpenFlow on Open vSwitch: the emulated fabric's queues count it
(mininet_topos/traffic_classes.py), a real switch's queue statistics do.
"""

from syncfabric.openflow import builders as of
from syncfabric.services.switch_counts import SwitchCounts, new_counts

GUARANTEED, BORROWED = "guaranteed", "borrowed"
METERS, TWINS = "meters", "twins"       # the two requests: the floors' meters, the twin flows
ENTERED, DROPPED = "entered", "dropped"  # a meter's two counts of bytes


class ClassCounters:
    def __init__(self, fabric, metrics):
        self.metrics = metrics
        self.counts = SwitchCounts(fabric)

    def requests(self):
        """{datapath: [request]}: ask every connected switch of the fabric for its counts."""
        def requests_of(datapath):
            meters, twins = of.class_counter_requests(datapath)
            return {METERS: meters, TWINS: twins}
        return self.counts.ask(requests_of)

    def meters_reply(self, datapath, xid, meter_stats, more):
        """A reply (part) to the meters' request: what entered each meter and what it
        dropped, in bytes."""
        counts = {}
        for stats in meter_stats:
            counts[stats.meter_id, ENTERED] = stats.byte_in_count
            counts[stats.meter_id, DROPPED] = sum(band.byte_band_count
                                                  for band in stats.band_stats)
        complete = self.counts.take(datapath, xid, METERS, more, counts)
        if complete is not None:
            switch, counted, fresh = complete
            self.metrics.class_bytes.labels(switch, GUARANTEED).inc(
                new_counts(of_kind(counted, ENTERED), of_kind(fresh, ENTERED)))
            self.metrics.floor_policed_bytes.labels(switch).inc(
                new_counts(of_kind(counted, DROPPED), of_kind(fresh, DROPPED)))

    def flows_reply(self, datapath, xid, flow_stats, more):
        """A reply (part) to the twins' request; other flow replies are ignored."""
        complete = self.counts.take(datapath, xid, TWINS, more, {
            (s.cookie, s.priority, tuple(sorted(s.match.items()))): s.byte_count
            for s in flow_stats})
        if complete is not None:
            switch, counted, fresh = complete
            self.metrics.class_bytes.labels(switch, BORROWED).inc(new_counts(counted, fresh))


def of_kind(counts, kind):
    """{meter id: bytes} of a meters' reply's counts of one kind (ENTERED, DROPPED)."""
    return {meter_id: count for (meter_id, counted_kind), count in counts.items()
            if counted_kind == kind}
