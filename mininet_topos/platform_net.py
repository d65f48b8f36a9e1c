"""Start a Mininet network the way this platform needs it (see ../shared/PLATFORM.md):

- Open vSwitch with the userspace datapath (the kernel has no OVS module),
  OpenFlow 1.3, fail-mode secure, connected to a remote controller;
- shaped links (HTB, as Mininet's TCLink) with checksum/segmentation
  offloads off on every veth, since TCP through the userspace datapath hangs
  otherwise;
- a multicast route on every host, so sending to 239.x.y.z works;
- optionally an out-of-band management network: a Linux bridge in the root
  namespace (where the controller runs) and one more interface per host, so
  programs inside hosts (a PS asking for trees) reach the controller's REST
  API without touching the data plane.
"""

import ipaddress
import re
import subprocess
from functools import partial

from mininet.link import Link, TCIntf
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import OVSSwitch, RemoteController

from mininet_topos.ovs_state import PlatformError, existing_bridges
from mininet_topos.traffic_classes import (assured_rates, class_commands, queue_counters,
                                           rate_commands)

OFFLOADS = ("tx", "rx", "tso", "gso", "gro")
MULTICAST_NET = "224.0.0.0/4"
MANAGEMENT_BRIDGE = "sf-mgmt0"
MANAGEMENT_NET = ipaddress.ip_network("172.30.0.0/16")
# Switch names our topologies give (spine-leaf, fat-tree, the worked examples): what a dead
# run of ours can have left in OVS, and nothing else.
FABRIC_SWITCH_NAME = re.compile(r"^(?:spine|leaf|c|s|v)\d+$|^p\d+[ae]\d+$")
# Command lines of a live emulation: its controller and Mininet's host shells.
LIVE_RUN_PATTERNS = ("ryu-manager", "mininet:")


HARMLESS_TC_WARNING = "Warning: sch_htb: quantum of class"


class ShapedIntf(TCIntf):
    """TCIntf that drops tc's harmless HTB quantum warning (printed for every link
    at our rates), so that real tc errors stay visible."""

    def tc(self, cmd, tc="tc"):
        output = super().tc(cmd, tc)
        return "".join(line for line in output.splitlines(keepends=True)
                       if not line.startswith(HARMLESS_TC_WARNING))


class ShapedLink(Link):
    def __init__(self, node1, node2, **params):
        params["intf"] = ShapedIntf  # Mininet.addLink passes its default interface class
        super().__init__(node1, node2, **params)


def check_bridges_free(topo):
    """Fail if a bridge of this topology is already in OVS (an earlier run left it)."""
    clashes = sorted(existing_bridges() & set(topo.switches()))
    if clashes:
        raise PlatformError("OVS already has bridges %s from an earlier run; clean up with `mn -c`"
                            % ", ".join(clashes[:4]) + (" ..." if len(clashes) > 4 else ""))


def live_run_pids():
    """Pids of a running emulation (controller or Mininet hosts), which a clean-up must not touch."""
    pids = set()
    for pattern in LIVE_RUN_PATTERNS:
        found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
        pids.update(int(pid) for pid in found.stdout.split())
    return sorted(pids)


def root_links():
    listing = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True)
    return [line.split(": ")[1].split("@")[0] for line in listing.stdout.splitlines()]


def leftovers():
    """What a run that died left behind: our bridges in OVS, their switch-side links in the
    root namespace, and the management bridge with its host links."""
    bridges = sorted(name for name in existing_bridges() if FABRIC_SWITCH_NAME.match(name))
    links = sorted(name for name in root_links()
                   if ("-eth" in name and FABRIC_SWITCH_NAME.match(name.split("-eth")[0]))
                   or name.startswith("mg-") or name == MANAGEMENT_BRIDGE)
    return {"bridges": bridges, "links": links}


def remove_leftovers(found):
    """Remove what leftovers() found; a veth whose peer went first is already gone."""
    for bridge in found["bridges"]:
        _root("ovs-vsctl --timeout=5 --if-exists del-br %s" % bridge)
    for link in found["links"]:
        subprocess.run(["ip", "link", "del", link], capture_output=True)
    remaining = leftovers()
    if remaining["bridges"] or remaining["links"]:
        raise PlatformError("could not remove %s; try `mn -c`"
                            % ", ".join(remaining["bridges"] + remaining["links"]))


def disable_offloads(node, interface):
    node.cmd("ethtool -K %s %s" % (interface, " ".join("%s off" % f for f in OFFLOADS)))


class RemoteControllerNode(RemoteController):
    """Mininet's RemoteController.stop() does nothing, so net.stop() leaves its shell running
    (a live-looking `mininet:c0` that makes the next clean-up refuse); this one ends it."""

    def stop(self, *_args, **_kwargs):
        self.terminate()

    def checkListening(self):
        """Nothing: Mininet telnets to the controller's port to warn if none listens, and
        reads what answers as UTF-8 text. Ours listens (the testbed starts it first and
        waits for it), and its OpenFlow hello, whose xid is random bytes, failed to decode
        now and then: "'utf-8' codec can't decode byte 0xe7" while building the fabric."""


def start_network(topo, controller_port, controller_ip="127.0.0.1", log_level="warning", mtu=1500,
                  port_queue=0, traffic_classes=False):
    """Build and start `topo` with every data-plane interface at `mtu` and every shaped
    switch port queueing `port_queue` frames (0: the kernel's queue; see
    mininet_topos/data_plane.py), with traffic_classes, in its guaranteed class, beside
    the borrowed one (traffic_classes.py); returns the started Mininet (stop it with
    net.stop())."""
    setLogLevel(log_level)
    switch = partial(OVSSwitch, datapath="user", protocols="OpenFlow13", failMode="secure")
    net = Mininet(topo=topo, switch=switch, link=ShapedLink, controller=None,
                  autoSetMacs=False, build=False)
    net.addController(RemoteControllerNode("c0", ip=controller_ip, port=controller_port))
    try:
        net.build()
        net.start()
        for node in net.hosts + net.switches:
            for interface in node.intfNames():
                if interface != "lo":
                    disable_offloads(node, interface)
                    node.cmd("ip link set %s mtu %d" % (interface, mtu))
        for host in net.hosts:
            host.cmd("ip route add %s dev %s" % (MULTICAST_NET, host.defaultIntf()))
        net.traffic_classes = traffic_classes   # shape_links reshapes them too
        if traffic_classes:
            add_traffic_classes(net, port_queue)
        elif port_queue:
            set_switch_queues(net, port_queue)
    except BaseException:
        net.stop()
        raise
    return net


def switch_ports(topo):
    """How many switch ports `topo` has: what OVS's transmit socket must hold queues for."""
    switches = set(topo.switches())
    return sum((node1 in switches) + (node2 in switches) for node1, node2 in topo.links())


def is_shaped(intf):
    """Whether Mininet gave `intf` its HTB class: it ignores a rate outside 0..bwParamMax."""
    return 0 < (intf.params.get("bw") or 0) <= intf.bwParamMax


def shaped_switch_ports(net):
    """The names of every switch port Mininet gave its HTB class."""
    return [intf.name for switch in net.switches for intf in switch.intfList()
            if intf.name != "lo" and is_shaped(intf)]


def shaped_switch_port_numbers(net):
    """{(switch, OpenFlow port): interface name} of every switch port Mininet gave its
    HTB class: where GET /fabric/links's links start (class_sizer.ClassSizer)."""
    return {(switch.name, switch.ports[intf]): intf.name for switch in net.switches
            for intf in switch.intfList() if intf.name != "lo" and is_shaped(intf)}


def set_switch_queues(net, frames):
    """Give every shaped switch port (under the HTB class ShapedLink set up) a queue of
    `frames` that drops at its head: the send that meets a full queue succeeds, and the
    qdisc counts the one frame it dropped."""
    command = "qdisc add dev %s parent 5:1 handle 10: pfifo_head_drop limit %d"
    tc_batch([command % (port, frames) for port in shaped_switch_ports(net)])


def switch_class_counters(net):
    """{switch port: traffic_classes.queue_counters} of every shaped switch port of a
    started fabric with its traffic classes."""
    return {port: queue_counters(subprocess.run(["tc", "-s", "qdisc", "show", "dev", port],
                                                capture_output=True, text=True,
                                                check=True).stdout)
            for port in shaped_switch_ports(net)}


def switch_class_rates(net):
    """{switch port: {"guaranteed", "borrowed": kbit/s assured}} of every shaped switch
    port of a fabric started with its traffic classes (class_sizer sizes them)."""
    return {port: assured_rates(subprocess.run(["tc", "class", "show", "dev", port],
                                               capture_output=True, text=True,
                                               check=True).stdout)
            for port in shaped_switch_ports(net)}


def add_traffic_classes(net, frames):
    """Give every shaped interface the guaranteed and borrowed classes (traffic_classes.py);
    a switch port's classes queue in pfifo_head_drop, the guaranteed one `frames` deep
    (0: the kernel's queues): the send that meets a full queue succeeds, and the qdisc
    counts the one frame it dropped."""
    root_side = []
    for node in net.switches + net.hosts:
        for intf in node.intfList():
            if intf.name == "lo" or not is_shaped(intf):
                continue
            commands = class_commands(intf.name, intf.params["bw"],
                                      frames if node in net.switches else 0)
            if node.inNamespace:
                _tc_in(node, commands)
            else:
                root_side += commands
    if root_side:
        tc_batch(root_side)


def shape_links(net, mbps):
    """Reshape every data-plane link of `net` to `mbps` in place (the HTB class that
    ShapedLink set up, and the traffic classes under it), without restarting anything:
    calibration probes rate after rate."""
    command = "class change dev %s parent 5:0 classid 5:1 htb rate %fMbit burst 15k"
    root_side = []
    for link in net.links:
        for intf in (link.intf1, link.intf2):
            commands = [command % (intf.name, mbps)]
            if net.traffic_classes:
                commands += rate_commands(intf.name, mbps)
            if intf.node.inNamespace:
                _tc_in(intf.node, commands)
            else:
                root_side += commands
    tc_batch(root_side)


def _tc_in(node, commands):
    """Run tc commands in a host's namespace, in one shell command; PlatformError if one fails."""
    output = node.cmd(" && ".join("tc " + command for command in commands) + " && echo tc-ok")
    if "tc-ok" not in output:
        raise PlatformError("tc failed on %s: %s" % (node.name, output.strip()))


def tc_batch(commands):
    """Run tc commands for the root namespace's interfaces in one tc process."""
    subprocess.run(["tc", "-batch", "-"], input="\n".join(commands) + "\n", text=True,
                   check=True, capture_output=True)


def _root(command):
    subprocess.run(command.split(), check=True, capture_output=True)


def management_network_exists():
    return subprocess.run(["ip", "link", "show", MANAGEMENT_BRIDGE], capture_output=True).returncode == 0


def check_management_network_free():
    """Fail if another run's management bridge is there (it may still be in use)."""
    if management_network_exists():
        raise PlatformError("the management bridge %s exists (another run, or one that crashed); "
                            "remove it with `ip link del %s`" % (MANAGEMENT_BRIDGE, MANAGEMENT_BRIDGE))


def remove_management_network():
    if management_network_exists():
        _root("ip link del %s" % MANAGEMENT_BRIDGE)


def add_management_network(net):
    """Give every host a `<host>-mgmt` interface on MANAGEMENT_NET; returns the root side's
    address, where a controller listening on all addresses answers. Hosts' veths go
    away with their namespaces; remove_management_network() removes the bridge."""
    addresses = MANAGEMENT_NET.hosts()
    controller_ip = str(next(addresses))
    _root("ip link add %s type bridge" % MANAGEMENT_BRIDGE)
    _root("ip addr add %s/%d dev %s" % (controller_ip, MANAGEMENT_NET.prefixlen, MANAGEMENT_BRIDGE))
    _root("ip link set %s up" % MANAGEMENT_BRIDGE)
    for host, address in zip(net.hosts, addresses):
        root_end, host_end = "mg-%s" % host.name, "%s-mgmt" % host.name
        _root("ip link add %s type veth peer name %s" % (root_end, host_end))
        _root("ip link set %s netns %d" % (host_end, host.pid))
        _root("ip link set %s master %s up" % (root_end, MANAGEMENT_BRIDGE))
        host.cmd("ip addr add %s/%d dev %s && ip link set %s up"
                 % (address, MANAGEMENT_NET.prefixlen, host_end, host_end))
    return controller_ip
