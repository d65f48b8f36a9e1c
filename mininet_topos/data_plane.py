"""How the emulated data plane is set up: the MTU of every fabric interface, the queue
of every switch port and the buffers of Open vSwitch's sockets.

The userspace datapath sends every packet, on every port of every bridge, through one
AF_PACKET socket that ovs-vswitchd opens at its first send with the buffer
net.core.wmem_default gives it (212992 bytes on Debian). A frame waiting in a port's
shaper is charged to that socket, so with that default about 90 frames of 1500 bytes, or
16 of 9000, queued anywhere in the fabric make the next send fail, and OVS drops the rest
of the batch (up to 32 packets), counting it in no port, qdisc or socket counter (only
one "error sending Ethernet packet" line in its log per batch). That was the loss no
counter explained: 16 PS shards' bursts, 16-worker streams, and 57% of jumbo all-to-all.
A shaper's queue that is full fails the send the same way (the kernel's tail drop
returns ENOBUFS, which OVS does not even log).

So every switch port holds its own queue of `switch_queue` frames that drops at its head
(pfifo_head_drop: the send succeeds and the qdisc counts the one frame it dropped), and
the transmit socket's buffer holds every port's queue full at once (`DataPlane.port_queue`): a
port that overflows loses what its qdisc counts, one for one, and no other port's sends
fail.

OVS reads each port through an AF_PACKET socket of its own, opened when the port is
added, with net.core.rmem_default's buffer: 212992 bytes hold 16 jumbo frames, and a
burst of more reaching a port while OVS's one thread is elsewhere overflows it (counted:
packet_drops' ovs-receive). 16 shards' returns did that at 16 workers.

DataPlane() is the default (jumbo frames, 256-frame port queues, a 1 GiB transmit and
4 MiB receive buffers); BASELINE is how every run was set up before (the kernel's
1000-frame tail-drop queues, Debian's buffers), kept for `experiments.calibrate
--compare-baseline`.
"""

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mininet_topos.ovs_state import PlatformError, existing_bridges
from mininet_topos.traffic_classes import BORROWED_QUEUE

OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"
WMEM_DEFAULT = Path("/proc/sys/net/core/wmem_default")
RMEM_DEFAULT = Path("/proc/sys/net/core/rmem_default")
DEBIAN_SOCKET_BUFFER = 212992
MIN_PORT_QUEUE = 16


@dataclass(frozen=True)
class DataPlane:
    mtu: int = 9000
    switch_queue: int = 256       # frames a switch port queues; 0: the kernel's tail-drop queue
    ovs_send_buffer: int = 1024 * 1024 * 1024
    ovs_receive_buffer: int = 4 * 1024 * 1024
    # every shaped interface gets the guaranteed and borrowed classes (traffic_classes.py);
    # off by default: classifying every packet at every port costs the emulator about a
    # fifth of what it carries (calibrated all-to-all: 84 Mbit/s per link without, 69 with)
    traffic_classes: bool = False

    def describe(self):
        queue = ("%d-frame head-drop port queues" % self.switch_queue if self.switch_queue
                 else "the kernel's port queues")
        return "MTU %d, %s%s, OVS send buffer %s, receive buffers %s" % (
            self.mtu, queue, ", guaranteed and borrowed classes" * self.traffic_classes,
            _size(self.ovs_send_buffer), _size(self.ovs_receive_buffer))

    def port_queue(self, switch_ports):
        """The frames each of `switch_ports` ports may queue (0: the kernel's queue): at most
        `switch_queue`, and few enough that OVS's transmit socket holds every queue full at
        once, or a send would fail before a queue overflows and its drops go uncounted.
        With traffic classes, this is the guaranteed class's queue; the borrowed class's
        BORROWED_QUEUE frames come on top (traffic_classes.py)."""
        if not self.switch_queue:
            return 0
        fitting = (self.ovs_send_buffer // (max(switch_ports, 1) * frame_truesize(self.mtu))
                   - BORROWED_QUEUE * self.traffic_classes)
        if fitting < MIN_PORT_QUEUE:
            raise PlatformError(
                "%d switch ports would get %d-frame queues within OVS's %s send buffer; a "
                "fabric this large needs a larger buffer (experiments.calibrate "
                "--ovs-send-buffer, or DataPlane(ovs_send_buffer=...))"
                % (switch_ports, fitting, _size(self.ovs_send_buffer)))
        return min(self.switch_queue, fitting)


def frame_truesize(mtu):
    """Kernel bytes a queued frame of `mtu` bytes is charged: the frame with its headroom
    and shared info rounded up to a power of two, plus the skb (16640 for 9000 bytes, as
    /proc/net/packet shows; 2304 for 1500)."""
    return (1 << (mtu + 400 - 1).bit_length()) + 256


BASELINE = DataPlane(mtu=1500, switch_queue=0, ovs_send_buffer=DEBIAN_SOCKET_BUFFER,
                     ovs_receive_buffer=DEBIAN_SOCKET_BUFFER)


def _size(count):
    for unit, shift in (("GiB", 30), ("MiB", 20)):
        if count % (1 << shift) == 0:
            return "%d %s" % (count >> shift, unit)
    return "%d bytes" % count


def ovs_transmit_buffer(ss_text):
    """The send buffer (bytes) of ovs-vswitchd's transmit socket in `ss -0 -m -p -n`'s
    output: the packet socket bound to no interface; None before its first send."""
    for line in ss_text.splitlines():
        if '"ovs-vswitchd"' in line and re.search(r"\s\[0\]:\*\s", line):
            found = re.search(r"\btb(\d+)", line)
            if found:
                return int(found.group(1))
    return None


def _current_transmit_buffer():
    # -p names every process with a packet socket, in whatever bytes it chose (stress-ng's
    # workers, for one, are not UTF-8): only OVS's line is read
    listing = subprocess.run(["ss", "-0", "-m", "-p", "-n"], capture_output=True, text=True,
                             errors="replace")
    return ovs_transmit_buffer(listing.stdout)


def apply_ovs_send_buffer(size):
    """Make OVS's transmit socket have `size` bytes of send buffer: set wmem_default (the
    socket takes it when it is opened, at OVS's first send after a start) and restart
    OVS if its socket is open with another size. A restart drops every bridge's
    datapath state, so it is refused while OVS has bridges. Returns whether OVS restarted."""
    WMEM_DEFAULT.write_text("%d\n" % size)
    current = _current_transmit_buffer()
    if current is None or current == size:
        return False
    bridges = existing_bridges()
    if bridges:
        raise PlatformError("OVS's transmit socket has a %d-byte send buffer, not %d, and OVS "
                            "cannot restart to change it while it has bridges (%s); remove them "
                            "(`make leftovers`, or `mn -c`) and try again"
                            % (current, size, ", ".join(sorted(bridges)[:4])))
    subprocess.run([OVS_CTL, "restart", "--system-id=random"], check=True, capture_output=True)
    return True


def apply_ovs_receive_buffer(size):
    """The receive buffer of the ports' sockets OVS opens from now on (rmem_default)."""
    RMEM_DEFAULT.write_text("%d\n" % size)
