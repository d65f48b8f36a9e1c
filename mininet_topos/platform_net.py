"""Start a Mininet network the way this platform needs it (see ../shared/PLATFORM.md):

- Open vSwitch with the userspace datapath (the kernel has no OVS module),
  OpenFlow 1.3, fail-mode secure, connected to a remote controller;
- shaped links (HTB, as Mininet's TCLink) with checksum/segmentation
  offloads off on every veth, since TCP through the userspace datapath hangs
  otherwise;
- a multicast route on every host, so sending to 239.x.y.z works.
"""

import shutil
import subprocess
from functools import partial

from mininet.link import Link, TCIntf
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import OVSSwitch, RemoteController

OFFLOADS = ("tx", "rx", "tso", "gso", "gro")
MULTICAST_NET = "224.0.0.0/4"


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


class PlatformError(RuntimeError):
    """The machine is not ready for a fabric (a one-line reason)."""


def check_ovs_running():
    if shutil.which("ovs-vsctl") is None:
        raise PlatformError("Open vSwitch is not installed (run `make setup`)")
    probe = subprocess.run(["ovs-vsctl", "--timeout=5", "show"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise PlatformError("Open vSwitch is not running (start it with `make ovs` or "
                            "`/usr/share/openvswitch/scripts/ovs-ctl start`)")


def existing_bridges():
    listing = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True,
                             text=True, check=True)
    return set(listing.stdout.split())


def check_bridges_free(topo):
    """Fail if a bridge of this topology is already in OVS (an earlier run left it)."""
    clashes = sorted(existing_bridges() & set(topo.switches()))
    if clashes:
        raise PlatformError("OVS already has bridges %s from an earlier run; clean up with `mn -c`"
                            % ", ".join(clashes[:4]) + (" ..." if len(clashes) > 4 else ""))


def disable_offloads(node, interface):
    node.cmd("ethtool -K %s %s" % (interface, " ".join("%s off" % f for f in OFFLOADS)))


def start_network(topo, controller_port, controller_ip="127.0.0.1", log_level="warning"):
    """Build and start `topo`; returns the started Mininet (stop it with net.stop())."""
    setLogLevel(log_level)
    switch = partial(OVSSwitch, datapath="user", protocols="OpenFlow13", failMode="secure")
    net = Mininet(topo=topo, switch=switch, link=ShapedLink, controller=None,
                  autoSetMacs=False, build=False)
    net.addController(RemoteController("c0", ip=controller_ip, port=controller_port))
    try:
        net.build()
        net.start()
        for host in net.hosts:
            for interface in host.intfNames():
                disable_offloads(host, interface)
            host.cmd("ip route add %s dev %s" % (MULTICAST_NET, host.defaultIntf()))
        for switch_node in net.switches:
            for interface in switch_node.intfNames():
                if interface != "lo":
                    disable_offloads(switch_node, interface)
    except BaseException:
        net.stop()
        raise
    return net
