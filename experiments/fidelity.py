"""Did the emulator keep up? An emulated result counts only when the run shows it did
(Mininet-HiFi's rule, Handigol et al., CoNEXT 2012).

Four invariants decide a row, each with the measure that decided it:
- the streams achieved their planned rate (achieved / planned >= RATE_RATIO_MIN);
- first-pass loss that no layer's drop counter accounts for stays under
  UNEXPLAINED_LOSS_MAX (experiments/packet_drops.py reads them: OVS's sockets, datapath
  and ports, meters, qdiscs, veths, backlogs, host sockets); `dropped_at` names the
  layers that dropped packets;
- neither ovs-vswitchd (whose one thread forwards every packet of the userspace
  datapath) nor the machine was saturated;
- traffic did not wait for ovs-vswitchd: the most bytes one of its receive sockets held
  at once (sampled every BACKLOG_SAMPLE_S) stays under OVS_BACKLOG_MAX_KB. A fabric
  offered more than ovs-vswitchd forwards loses nothing while those buffers fill, but
  every packet waits: rounds slow down for the emulator, not for the network.

`verdict` is pure; `PlatformSampler` reads the counters and CPU times around a run.
"""

import dataclasses
import logging
import statistics
import threading
import time
from dataclasses import dataclass, field

from experiments import packet_drops

LOG = logging.getLogger("experiments.fidelity")

RATE_RATIO_MIN = 0.9
UNEXPLAINED_LOSS_MAX = 0.001
OVS_CPU_MAX = 0.97         # of one core: pegged (0.9 is common on a platform that keeps up)
MACHINE_BUSY_MAX = 0.95    # of all cores
# in one OVS receive socket: more than one read batch of OVS's (NETDEV_MAX_BURST, 32
# packets) of 9000-byte frames, which take 16640 kernel bytes each (measured)
OVS_BACKLOG_MAX_KB = 32 * 16640 / 1024
BACKLOG_SAMPLE_S = 0.02

COLUMNS = ["fidelity_ok", "fidelity_reason", "rate_ratio", "first_pass_loss", "unexplained_loss",
           "dropped_at", "ovs_cpu", "machine_busy", "ovs_backlog_kb"]


@dataclass
class Usage:
    """What a run cost the platform: CPU shares and the drops its counters explain."""
    ovs_cpu: float = 0.0         # ovs-vswitchd CPU seconds per second (1.0 = one core)
    machine_busy: float = 0.0    # share of all cores busy
    drops: dict = field(default_factory=dict)   # {layer: packets}, packet_drops.DATA_LAYERS
    ovs_backlog_kb: float = 0.0  # the most one OVS receive socket held (packet_drops.receive_backlog)
    backlog: list = field(default_factory=list)   # its samples: [(time.time(), bytes)]

    def explained_drops(self):
        return packet_drops.data_drops(self.drops)

    def during(self, start, end):
        """This usage with the backlog of start..end only (time.time(), a sample period
        either side): a round is judged by the traffic that waited for ovs-vswitchd
        while it ran, not in the run's other rounds. CPU shares and drops stay the run's.
        Unchanged without samples."""
        if not self.backlog:
            return self
        held = [most for at, most in self.backlog
                if start - BACKLOG_SAMPLE_S <= at <= end + BACKLOG_SAMPLE_S]
        return dataclasses.replace(self, ovs_backlog_kb=max(held, default=0) / 1024)

    @classmethod
    def worst(cls, usages):
        """Several phases of one row: the busiest CPU shares and all the drops."""
        drops = {}
        for usage in usages:
            for kind, count in usage.drops.items():
                drops[kind] = drops.get(kind, 0) + count
        return cls(ovs_cpu=max(u.ovs_cpu for u in usages),
                   machine_busy=max(u.machine_busy for u in usages), drops=drops,
                   ovs_backlog_kb=max(u.ovs_backlog_kb for u in usages),
                   backlog=sorted(sample for u in usages for sample in u.backlog))


def verdict(planned_mbps, achieved_mbps, first_pass_loss, lost_packets, usage):
    """The fidelity columns of one row. planned/achieved: the sending rate the row
    planned and the one its streams reached (None where the row plans no rate);
    first_pass_loss: the share of packets receivers missed in the first pass (None for
    TCP rows, whose losses are repaired by TCP); lost_packets: how many that was."""
    rate_ratio = None if not planned_mbps else achieved_mbps / planned_mbps
    unexplained = unexplained_loss(first_pass_loss, lost_packets, usage)
    reasons = []
    if rate_ratio is not None and rate_ratio < RATE_RATIO_MIN:
        reasons.append("achieved %.0f%% of the planned rate" % (100 * rate_ratio))
    dropped_at = packet_drops.where(usage.drops)
    if unexplained is not None and unexplained > UNEXPLAINED_LOSS_MAX:
        reasons.append("%.2f%% first-pass loss no counter explains (%s)"
                       % (100 * unexplained, dropped_at or "no layer counted a drop"))
    if usage.ovs_cpu > OVS_CPU_MAX:
        reasons.append("ovs-vswitchd at %.0f%% of a core" % (100 * usage.ovs_cpu))
    if usage.machine_busy > MACHINE_BUSY_MAX:
        reasons.append("machine %.0f%% busy" % (100 * usage.machine_busy))
    if waited_for_ovs(usage.ovs_backlog_kb):
        reasons.append("%.0f KB waited for ovs-vswitchd in one port" % usage.ovs_backlog_kb)
    return {"fidelity_ok": not reasons, "fidelity_reason": "; ".join(reasons) or "kept up",
            "rate_ratio": _rounded(rate_ratio), "first_pass_loss": _rounded(first_pass_loss, 5),
            "unexplained_loss": _rounded(unexplained, 5), "dropped_at": dropped_at,
            "ovs_cpu": round(usage.ovs_cpu, 3),
            "machine_busy": round(usage.machine_busy, 3),
            "ovs_backlog_kb": round(usage.ovs_backlog_kb, 1)}


def waited_for_ovs(backlog_kb):
    """Whether traffic waited for ovs-vswitchd longer than a faithful run lets it: more
    than OVS_BACKLOG_MAX_KB in one of its receive sockets at once."""
    return backlog_kb > OVS_BACKLOG_MAX_KB


def unexplained_loss(loss, lost_packets, usage):
    """The part of `loss` (a share of deliveries; lost_packets of them) that the drops
    counted in `usage` do not account for; None where there is no loss to tell (TCP)."""
    if loss is None:
        return None
    explained_share = min(1.0, usage.explained_drops() / lost_packets) if lost_packets else 1.0
    return loss * (1.0 - explained_share)


def faithful(row):
    """Whether a CSV or in-memory row was marked faithful."""
    return str(row.get("fidelity_ok")) in ("True", "true", "1")


def faithful_median(rows, key):
    """The median of `key` over the faithful rows, or None if none is."""
    values = [row[key] for row in rows if faithful(row)]
    return statistics.median(values) if values else None


def unfaithful_note(rows):
    """A summary line on the rows that are not faithful (empty if all are)."""
    reasons = sorted({row["fidelity_reason"] for row in rows if not faithful(row)})
    if not reasons:
        return ""
    return ("%d of %d rows not faithful, no ratio uses them: %s"
            % (sum(not faithful(row) for row in rows), len(rows), " | ".join(reasons)))


def _rounded(value, digits=3):
    return None if value is None else round(value, digits)


# --- reading the platform -------------------------------------------------------------

def _machine_times():
    fields = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields), idle


def process_cpu_seconds(pid):
    """The CPU time (user and system) process `pid` has taken since it started
    (OSError if there is no such process)."""
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _ovs_cpu_seconds():
    try:
        return process_cpu_seconds(int(open("/var/run/openvswitch/ovs-vswitchd.pid").read()))
    except (OSError, ValueError):
        return 0.0


_CLOCK_TICKS = 100   # USER_HZ on Linux


class BacklogWatch:
    """The most bytes one OVS receive socket held, sampled every BACKLOG_SAMPLE_S by a
    thread between start() and stop() (which returns the samples, [(time.time(),
    bytes)])."""

    def __init__(self, path="/proc/net/packet"):
        self.path, self.samples = path, []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="ovs-backlog", daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()
        self.thread.join()
        return self.samples

    def _watch(self):
        while not self.stopping.wait(BACKLOG_SAMPLE_S):
            try:
                with open(self.path) as table:
                    self.samples.append((time.time(), packet_drops.receive_backlog(table.read())))
            except OSError as error:   # the rows then show only what was read before
                LOG.warning("cannot read OVS's receive backlog any more: %s", error)
                return


class PlatformSampler:
    """CPU and drop counters of a running testbed, between start() and stop(), and the
    most traffic that waited for ovs-vswitchd meanwhile."""

    def __init__(self, hosts=()):
        self.hosts = list(hosts)    # Mininet hosts: their queues and sockets count too

    def _times(self):
        total, idle = _machine_times()
        return {"time": time.monotonic(), "total": total, "idle": idle, "ovs": _ovs_cpu_seconds()}

    def start(self):
        self.started = dict(self._times(), counters=packet_drops.read_counters(self.hosts))
        self.backlog = BacklogWatch().start()
        return self

    def stop(self):
        end, start = self._times(), self.started
        backlog = self.backlog.stop()
        # OVS adds a thread's coverage counts (meter and datapath drops) to the totals it
        # shows at most once a second: the run's last second shows only after that
        time.sleep(packet_drops.COVERAGE_FLUSH_S)
        elapsed = max(end["time"] - start["time"], 1e-9)
        ticks = max(end["total"] - start["total"], 1)
        return Usage(ovs_cpu=(end["ovs"] - start["ovs"]) / elapsed,
                     machine_busy=1.0 - (end["idle"] - start["idle"]) / ticks,
                     drops=packet_drops.dropped_between(start["counters"],
                                                        packet_drops.read_counters(self.hosts)),
                     ovs_backlog_kb=max((most for _at, most in backlog), default=0) / 1024,
                     backlog=backlog)
