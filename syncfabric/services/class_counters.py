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
from syncfabric.services.admission_drops import new_counts

GUARANTEED, BORROWED = "guaranteed", "borrowed"


class ClassCounters:
    def __init__(self, fabric, metrics):
        self.fabric, self.metrics = fabric, metrics
        self._asked = {}     # (dpid, what: "meters" or "twins") -> the xid of its last request
        self._counted = {}   # (dpid, what) -> {key: bytes counted so far}
        self._fresh = {}     # (dpid, what) -> {key: bytes} of the reply being read

    def requests(self):
        """{datapath: [request]}: ask every connected switch of the fabric for its counts."""
        view, asks = self.fabric.view, {}
        for datapath in self.fabric.connected():
            if view is None or datapath.id not in view.switch_by_dpid:
                continue
            meters, twins = of.class_counter_requests(datapath)
            self._asked[datapath.id, "meters"] = datapath.set_xid(meters)
            self._asked[datapath.id, "twins"] = datapath.set_xid(twins)
            asks[datapath] = [meters, twins]
        return asks

    def meters_reply(self, datapath, xid, meter_stats, more):
        """A reply (part) to the meters' request: {meter id: (bytes in, bytes dropped)}."""
        self._take(datapath, xid, "meters", more, {
            stats.meter_id: (stats.byte_in_count,
                             sum(band.byte_band_count for band in stats.band_stats))
            for stats in meter_stats})

    def flows_reply(self, datapath, xid, flow_stats, more):
        """A reply (part) to the twins' request; other flow replies are ignored."""
        self._take(datapath, xid, "twins", more, {
            (s.cookie, s.priority, tuple(sorted(s.match.items()))): (s.byte_count, 0)
            for s in flow_stats})

    def _take(self, datapath, xid, what, more, counts):
        key = datapath.id, what
        if self._asked.get(key) != xid or self.fabric.view is None:
            return
        self._fresh.setdefault(key, {}).update(counts)
        switch = self.fabric.view.switch_by_dpid.get(datapath.id)
        if more or switch is None:
            return
        fresh, counted = self._fresh.pop(key), self._counted.get(key, {})
        entered = new_counts({k: v[0] for k, v in counted.items()},
                              {k: v[0] for k, v in fresh.items()})
        self.metrics.class_bytes.labels(switch, GUARANTEED if what == "meters" else BORROWED
                                        ).inc(entered)
        if what == "meters":
            self.metrics.floor_policed_bytes.labels(switch).inc(new_counts(
                {k: v[1] for k, v in counted.items()}, {k: v[1] for k, v in fresh.items()}))
        self._counted[key] = fresh
        del self._asked[key]
