"""Keeps the emulated switch ports' traffic classes sized to the floors booked on their
links, as jobs and trees come and go (traffic_classes.class_rates says how).

The controller books every floor on the links it crosses and says so in GET
/fabric/links (`reserved_mbps` per directed link, its tail's port); ClassSizer reads
that every SIZING_INTERVAL_S and changes, in one tc process, the classes of the switch
ports whose booked floors moved. A real Linux switch with `linux-htb` queues could
follow the same report; one with strict-priority queues needs nothing (docs/deploy.md).
"""

import logging
import threading

from mininet_topos.traffic_classes import class_rates, rate_commands

SIZING_INTERVAL_S = 0.5   # the controller re-plans shares on a timer as often

LOG = logging.getLogger(__name__)


def resized(links, ports, applied):
    """{interface: (link Mbit/s, booked Mbit/s)} of the switch ports in `ports`
    ({(switch, port): interface}) whose classes GET /fabric/links's `links` sizes
    otherwise than `applied` ({interface: class_rates} as last set)."""
    changes = {}
    for link in links:
        interface = ports.get((link["src"], link["src_port"]))
        if interface is None:   # a host's port, or one Mininet did not shape
            continue
        sizes = (link["capacity_mbps"], link["reserved_mbps"])
        if applied.get(interface) != class_rates(*sizes):
            changes[interface] = sizes
    return changes


class ClassSizer:
    """A thread that sizes the classes of `ports` ({(switch, port): interface}, in the
    root namespace) from read_links() (GET /fabric/links's list) with run_tc(commands)
    (platform_net's tc batch); a failed read or tc is logged, and tried again."""

    def __init__(self, ports, read_links, run_tc, interval_s=SIZING_INTERVAL_S):
        self.ports, self.read_links, self.run_tc = ports, read_links, run_tc
        self.interval_s = interval_s
        self.applied = {}   # {interface: class_rates} as last set
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="class-sizer", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def size_once(self):
        """Bring every port's classes to the floors booked now; returns the interfaces
        changed."""
        changes = resized(self.read_links(), self.ports, self.applied)
        if changes:
            self.run_tc([command for interface, sizes in sorted(changes.items())
                         for command in rate_commands(interface, *sizes)])
            for interface, sizes in changes.items():
                self.applied[interface] = class_rates(*sizes)
            LOG.info("traffic classes sized to the booked floors on %d switch port(s)",
                     len(changes))
        return sorted(changes)

    def _run(self):
        while not self._stop.wait(self.interval_s):
            try:
                self.size_once()
            except Exception:   # the controller restarting, a port going: next time
                LOG.exception("sizing the traffic classes failed; trying again")
