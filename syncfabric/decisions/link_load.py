"""Per-link rates and utilization from polled port counters.

Switches report cumulative byte counters per port together with how long the
port has existed; the difference between two polls over the difference in
port age is the rate over the last interval, measured by the switch's clock
rather than by when the reply reached the controller.
"""


class PortRates:
    """Bit rates per (dpid, port, direction) from successive cumulative counters."""

    def __init__(self):
        self._last = {}
        self._rate_bps = {}

    def update(self, dpid, port, direction, byte_count, port_age_s):
        """Record a counter sample; direction is "tx" or "rx"."""
        key = (dpid, port, direction)
        previous = self._last.get(key)
        self._last[key] = (byte_count, port_age_s)
        if previous is None:
            return
        bytes_before, age_before = previous
        if byte_count < bytes_before or port_age_s <= age_before:
            self._rate_bps.pop(key, None)  # port was reset: start over
            return
        self._rate_bps[key] = 8.0 * (byte_count - bytes_before) / (port_age_s - age_before)

    def update_ports(self, dpid, stats):
        """Port statistics of one switch: (port_no, tx_bytes, rx_bytes, age_s) per port."""
        for port, tx_bytes, rx_bytes, age_s in stats:
            self.update(dpid, port, "tx", tx_bytes, age_s)
            self.update(dpid, port, "rx", rx_bytes, age_s)

    def rate_bps(self, dpid, port, direction):
        """The last measured rate, or None before two samples."""
        return self._rate_bps.get((dpid, port, direction))

    def measured(self):
        """[((dpid, port, direction), bit/s)] of every port with a rate."""
        return list(self._rate_bps.items())

    def forget(self, dpid):
        for table in (self._last, self._rate_bps):
            for key in [k for k in table if k[0] == dpid]:
                del table[key]


def measured_mbps(view, rates):
    """{(tail, head): Mbit/s} for every directed link with a measurement (none before a
    port's second sample). A link leaving a switch is measured by that port's tx counter;
    a link leaving a host by the rx counter of the switch port it enters. Read from the
    measured ports, not by visiting every link (a 64x64 fabric has 8,500)."""
    measured = {}
    for (dpid, port, direction), rate_bps in rates.measured():
        switch = view.switch_by_dpid.get(dpid)
        neighbour = view.neighbour_at(switch, port)
        if neighbour is None:
            continue
        if direction == "tx":
            measured[switch, neighbour] = rate_bps / 1e6
        elif view.is_host(neighbour):
            measured[neighbour, switch] = rate_bps / 1e6
    return measured


def link_report(view, rates, reserved_mbps):
    """One dict per directed link: endpoints, capacity, bandwidth reserved on it, current
    rate and utilization."""
    report, measured = [], measured_mbps(view, rates)
    for tail, head, data in view.links():
        rate_mbps = measured.get((tail, head))
        report.append({
            "src": tail, "src_port": data["port"], "dst": head,
            "dst_port": view.out_port(head, tail), "kind": data["kind"],
            "capacity_mbps": data["capacity_mbps"],
            "reserved_mbps": reserved_mbps.get((tail, head), 0.0), "rate_mbps": rate_mbps,
            "utilization": None if rate_mbps is None else rate_mbps / data["capacity_mbps"],
        })
    return report
