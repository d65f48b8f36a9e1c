"""Where packets died during a run, layer by layer, from the counters each layer keeps.

A datagram from one host to another passes the sender's UDP socket and qdisc, a veth,
Open vSwitch (its AF_PACKET receive socket, the datapath, its transmit socket, one per
hop), the shaper on each switch port, and the receiver's veth and socket. Each layer
that can drop a packet counts it somewhere; `read_counters` reads them all and
`dropped_between` gives what each layer dropped in between:

- `ovs-receive`: OVS's AF_PACKET socket on a port overflowed (`ss -0 -m`, its d field,
  which is PACKET_STATISTICS' tp_drops);
- `ovs-datapath`: the datapath dropped by reason (`coverage/show`'s datapath_drop_* and
  drop_action_*, meters apart) or lost an upcall (`dpctl/show`'s lookups lost);
- `meter`: a meter band (datapath_drop_meter), which a reservation drops by design
  (coverage counts reach coverage/show's totals up to a second late: read them
  COVERAGE_FLUSH_S after the traffic);
- `ovs-transmit`: a send on OVS's transmit socket failed, which loses the batch (OVS logs
  each failure, and nothing else counts it: mininet_topos/data_plane.py);
- `ovs-port`: OVS's port counters (`dpctl/show -s`: rx and tx dropped and errors,
  the kernel's counters of the switch-side veths included);
- `qdisc`: a shaper's queue was full (`tc -s qdisc`, the root namespace and the hosts);
- `veth`: a host-side veth (`ip -s link` in the hosts);
- `softnet`: a CPU's backlog was full (/proc/net/softnet_stat);
- `host-socket`: a host's UDP socket (RcvbufErrors and InErrors of /proc/net/snmp).

`control` counts what no data packet can meet: ARP and packet-ins that failed their
upcall (datapath_drop_userspace_action_error; a host repeats its ARP). It is reported,
and never used to explain a data packet's loss.
"""

import re
import subprocess
from pathlib import Path

DATA_LAYERS = ("ovs-receive", "ovs-datapath", "meter", "ovs-transmit", "ovs-port", "qdisc",
               "veth", "softnet", "host-socket")
CONTROL = "control"
OVS_LOG = Path("/var/log/openvswitch/ovs-vswitchd.log")
SEND_FAILURE = "error sending Ethernet packet"
CONTROL_COUNTERS = {"datapath_drop_userspace_action_error"}
COVERAGE_FLUSH_S = 1.1   # OVS moves a thread's coverage counts to the totals once a second
METER_COUNTER = "datapath_drop_meter"


# --- each layer's text, parsed (pure) ----------------------------------------------------

def coverage_drops(text):
    """{counter: total} of coverage/show's drop counters."""
    found = {}
    for line in text.splitlines():
        match = re.match(r"(datapath_drop_\w+|drop_action_\w+)\s.*total: (\d+)", line)
        if match:
            found[match.group(1)] = int(match.group(2))
    return found


def datapath_layers(coverage):
    """coverage_drops() split into ovs-datapath, meter and control counts."""
    layers = {"ovs-datapath": 0, "meter": 0, CONTROL: 0}
    for counter, count in coverage.items():
        kind = ("meter" if counter == METER_COUNTER else
                CONTROL if counter in CONTROL_COUNTERS else "ovs-datapath")
        layers[kind] += count
    return layers


def lookups_lost(dpctl_text):
    """Packets lost to failed upcalls (`dpctl/show`'s lookups: ... lost:N)."""
    return sum(int(n) for n in re.findall(r"lookups: hit:\d+ missed:\d+ lost:(\d+)", dpctl_text))


def port_drops(dpctl_text):
    """Rx and tx drops and errors over every port of `dpctl/show -s`."""
    total = 0
    for line in dpctl_text.splitlines():
        match = re.match(r"\s+[RT]X packets:\d+ errors:(\d+) dropped:(\d+)", line)
        if match:
            total += int(match.group(1)) + int(match.group(2))
    return total


def packet_socket_drops(ss_text, owner="ovs-vswitchd"):
    """Drops (skmem's d) of `owner`'s packet sockets in `ss -0 -m -p -n`."""
    return sum(int(match) for line in ss_text.splitlines() if '"%s"' % owner in line
               for match in re.findall(r"skmem:\([^)]*\bd(\d+)\)", line))


def receive_backlog(proc_net_packet):
    """The most bytes waiting in one bound AF_PACKET socket (Rmem of /proc/net/packet,
    the root namespace's: there, during an emulation, those are OVS's receive sockets):
    traffic that reached a switch and that ovs-vswitchd has not read yet. It waits
    without loss until the socket's buffer is full, so only this shows it."""
    most = 0
    for line in proc_net_packet.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 7 and fields[4] != "0":   # Iface 0: a socket bound to no port
            most = max(most, int(fields[6]))
    return most


def qdisc_drops(text):
    """Drops of the root qdiscs of `tc -s qdisc`: an HTB root counts what the queue under
    it dropped too, so a child's own count would be a second one."""
    return sum(int(n) for n in re.findall(r"^qdisc [^\n]* root [^\n]*\n[^\n]*dropped (\d+)", text,
                                          re.MULTILINE))


def link_drops(text):
    """Rx and tx dropped over the interfaces of `ip -s link` (loopback apart)."""
    total, lines, interface = 0, text.splitlines(), None
    for number, line in enumerate(lines):
        header = re.match(r"\d+: ([^:@]+)", line)
        if header:
            interface = header.group(1)
        fields = line.split()
        if fields[:1] in (["RX:"], ["TX:"]) and "dropped" in fields and interface != "lo" \
                and number + 1 < len(lines):
            total += int(lines[number + 1].split()[fields.index("dropped") - 1])
    return total


def softnet_drops(text):
    """The backlog drops of every CPU (/proc/net/softnet_stat's second column, in hex)."""
    return sum(int(line.split()[1], 16) for line in text.splitlines() if len(line.split()) > 1)


def udp_socket_drops(snmp):
    lines = [line.split() for line in snmp.splitlines() if line.startswith("Udp:")]
    if len(lines) < 2:
        return 0
    counters = dict(zip(lines[0][1:], lines[1][1:]))
    return int(counters.get("RcvbufErrors", 0)) + int(counters.get("InErrors", 0))


def send_failures(log_text):
    """OVS's failed sends in a stretch of its log (each lost a batch of at least one packet)."""
    return sum(SEND_FAILURE in line for line in log_text.splitlines())


# --- reading them, and what changed ----------------------------------------------------

def _run(*command):
    """A counter tool's output as text; bytes that are not UTF-8 (a process's or an
    interface's name) become U+FFFD, as only the counters are read."""
    return subprocess.run(command, capture_output=True, text=True, errors="replace").stdout


def _log_size():
    try:
        return OVS_LOG.stat().st_size
    except OSError:
        return 0


def _log_since(offset):
    try:
        with open(OVS_LOG, errors="replace") as log:
            log.seek(offset)
            return log.read()
    except OSError:
        return ""


def read_counters(hosts=()):
    """Every layer's cumulative count now ({layer: n}, plus `control` and the OVS log's
    offset); `hosts` are Mininet hosts (anything with cmd())."""
    # every failed send is logged, not one in many: the count is the log's lines
    subprocess.run(["ovs-appctl", "vlog/disable-rate-limit", "netdev_linux"], capture_output=True)
    dpctl = _run("ovs-appctl", "dpctl/show", "-s")
    counts = datapath_layers(coverage_drops(_run("ovs-appctl", "coverage/show")))
    counts["ovs-datapath"] += lookups_lost(dpctl)
    counts["ovs-port"] = port_drops(dpctl)
    counts["ovs-receive"] = packet_socket_drops(_run("ss", "-0", "-m", "-p", "-n"))
    counts["qdisc"] = qdisc_drops(_run("tc", "-s", "qdisc", "show"))
    counts["softnet"] = softnet_drops(Path("/proc/net/softnet_stat").read_text())
    counts["veth"] = counts["host-socket"] = 0
    for host in hosts:
        counts["qdisc"] += qdisc_drops(host.cmd("tc -s qdisc show"))
        counts["veth"] += link_drops(host.cmd("ip -s link"))
        counts["host-socket"] += udp_socket_drops(host.cmd("cat /proc/net/snmp"))
    counts["log_offset"] = _log_size()
    return counts


def dropped_between(before, after):
    """{layer: packets dropped} from two read_counters(), data layers then `control`.
    Counters that went down (a port or an OVS that went away) count nothing."""
    dropped = {layer: max(0, after.get(layer, 0) - before.get(layer, 0))
               for layer in DATA_LAYERS + (CONTROL,) if layer != "ovs-transmit"}
    dropped["ovs-transmit"] = send_failures(_log_since(before["log_offset"]))
    return {layer: dropped[layer] for layer in DATA_LAYERS + (CONTROL,)}


def data_drops(drops):
    """Packets the data layers dropped (what may explain a data packet's loss)."""
    return sum(count for layer, count in drops.items() if layer != CONTROL)


def where(drops):
    """The layers that dropped anything, as `layer:count` joined by spaces ("" if none)."""
    return " ".join("%s:%d" % (layer, count) for layer, count in drops.items() if count)
