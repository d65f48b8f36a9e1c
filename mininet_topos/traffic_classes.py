"""The fabric's two traffic classes (syncfabric/traffic_classes.py) on the emulated
fabric's shaped interfaces, switch ports and hosts' alike.

Mininet's TCLink shapes an interface with HTB root 5: and one class 5:1 at the link's
rate. Under 5:1 we put two (../shared/PLATFORM.md, "Priority and sharing"):
- 5:10, guaranteed: rate and ceiling the link's, priority 0. It never waits for
  borrowed traffic: its own rate is the link's.
- 5:20, borrowed: a token rate, ceiling the link's, priority 1. It sends only what 5:1
  has left once 5:10 took its part, so it is served from what guaranteed traffic leaves.
A filter at the root sends BORROWED_DSCP to 5:20; everything else (guaranteed, ARP,
TCP) goes to HTB's default, 5:10, not Mininet's 5:1: 5:1 is no longer a leaf, and HTB
would send what no filter classifies to its unshaped direct queue. HTB cannot change
its default in place, so the root is made again, and 5:1 as Mininet makes it. (A
catch-all filter instead costs one more classifier per packet per port: it took the
fabric's calibrated all-to-all rate from 84 to 63 Mbit/s per link on the AMD EPYC.)

The classes start with the guaranteed one at the link's rate: strict priority, as a
real switch's queues give it. While the fabric runs, class_sizer.py keeps each switch
port's sized to the floors booked on its link (class_rates): the guaranteed class is
assured those floors and FLOOR_HEADROOM more, the borrowed one what they leave, so
traffic sent unmarked beyond every floor no longer crowds out what is borrowed. A
host's port keeps strict priority: only its own senders share it.

A switch port's classes each queue in a pfifo_head_drop (data_plane.py says why): the
guaranteed one `frames` deep (handle 10:, where packet_drops reads a port's drops), the
borrowed one BORROWED_QUEUE (handle 20:). A host's guaranteed class keeps the kernel's
default queue, its borrowed one the same short queue. The classes go with their
interfaces when the fabric stops.
"""

import re

from syncfabric.traffic_classes import BORROWED_DSCP, tos_byte

GUARANTEED_CLASS, BORROWED_CLASS = "5:10", "5:20"
GUARANTEED_QUEUE, BORROWED_QUEUE_HANDLE = "10:", "20:"
BORROWED_QUEUE = 64          # frames a switch port's borrowed class queues
MIN_RATE_KBIT = 8            # HTB needs a rate: a class with nothing booked is assured this
# the guaranteed class's rate over the floors booked on its link: datagrams' headers and
# the floors' meters' bursts, which pass a little more than the floor for a moment
FLOOR_HEADROOM = 1.1
QUANTUM_BYTES = 10000        # above a jumbo frame; set, or tc warns at our rates
DSCP_MASK = 0xfc             # the TOS byte's DSCP bits


def class_commands(interface, rate_mbps, frames=0):
    """tc commands (without the leading `tc`) that give `interface`, shaped by Mininet
    at rate_mbps, the two classes and their filters. The borrowed class queues
    BORROWED_QUEUE frames and drops at its head (a host's too: borrowed datagrams the
    link has no room for are dropped, not held in its senders' socket buffers); frames
    > 0: a switch port's guaranteed queue, as deep, dropping at its head."""
    link = "%fMbit" % rate_mbps
    commands = [   # Mininet's root and link class, the root's default now the guaranteed class
        "qdisc del dev %s root" % interface,
        "qdisc add dev %s root handle 5: htb default %s"
        % (interface, GUARANTEED_CLASS.split(":")[1]),
        "class add dev %s parent 5: classid 5:1 htb rate %s burst 15k" % (interface, link)]
    commands += ["class add" + command for command in _class_lines(interface, rate_mbps)]
    if frames:
        commands.append("qdisc add dev %s parent %s handle %s pfifo_head_drop limit %d"
                        % (interface, GUARANTEED_CLASS, GUARANTEED_QUEUE, frames))
    commands.append("qdisc add dev %s parent %s handle %s pfifo_head_drop limit %d"
                    % (interface, BORROWED_CLASS, BORROWED_QUEUE_HANDLE, BORROWED_QUEUE))
    commands += [
        "filter add dev %s parent 5: protocol ip prio 1 u32 match ip dsfield 0x%02x 0x%02x "
        "flowid %s" % (interface, tos_byte(BORROWED_DSCP), DSCP_MASK, BORROWED_CLASS)]
    return commands


def class_rates(link_mbps, booked_mbps=None):
    """(guaranteed, borrowed) kbit/s the classes of a link of link_mbps are assured when
    booked_mbps of floors are booked on it: the floors and FLOOR_HEADROOM more, and what
    they leave; both may take the whole link while the other is idle. booked_mbps None:
    no floors known, the guaranteed class assured the whole link (strict priority)."""
    link = int(round(link_mbps * 1000))
    wanted = link if booked_mbps is None else int(round(booked_mbps * FLOOR_HEADROOM * 1000))
    guaranteed = min(link, max(MIN_RATE_KBIT, wanted))
    return guaranteed, max(MIN_RATE_KBIT, link - guaranteed)


def rate_commands(interface, rate_mbps, booked_mbps=None):
    """tc commands that move both classes of `interface` to a link of rate_mbps (reshaped
    by platform_net.shape_links) with booked_mbps of floors on it (class_rates)."""
    return ["class change" + command
            for command in _class_lines(interface, rate_mbps, booked_mbps)]


def _class_lines(interface, rate_mbps, booked_mbps=None):
    """The two classes' definitions after `class add` or `class change`."""
    guaranteed, borrowed = class_rates(rate_mbps, booked_mbps)
    link = "%fMbit" % rate_mbps
    line = " dev %s parent 5:1 classid %s htb rate %dkbit ceil %s prio %d quantum %d"
    return [line % (interface, GUARANTEED_CLASS, guaranteed, link, 0, QUANTUM_BYTES),
            line % (interface, BORROWED_CLASS, borrowed, link, 1, QUANTUM_BYTES)]


QUEUE_STATS = re.compile(r"qdisc pfifo_head_drop (\d+:) parent \S+ .*?\n\s*Sent (\d+) bytes "
                         r"(\d+) pkt \(dropped (\d+),")
CLASS_OF_QUEUE = {GUARANTEED_QUEUE: "guaranteed", BORROWED_QUEUE_HANDLE: "borrowed"}


def queue_counters(qdisc_text):
    """{"guaranteed" | "borrowed": {"bytes", "packets", "dropped"}} of a switch port, read
    from `tc -s qdisc show dev <port>`: what each class's queue sent, and dropped at its
    head."""
    found = {}
    for handle, sent, packets, dropped in QUEUE_STATS.findall(qdisc_text):
        if handle in CLASS_OF_QUEUE:
            found[CLASS_OF_QUEUE[handle]] = {"bytes": int(sent), "packets": int(packets),
                                             "dropped": int(dropped)}
    return found


CLASS_RATE = re.compile(r"class htb (5:10|5:20) parent \S+ (?:leaf \S+ )?prio \d+ "
                        r"rate (\d+(?:\.\d+)?)([KMG]?)bit")
KBIT_PER_UNIT = {"": 0.001, "K": 1, "M": 1000, "G": 1000000}
CLASS_NAMES = {GUARANTEED_CLASS: "guaranteed", BORROWED_CLASS: "borrowed"}


def assured_rates(class_text):
    """{"guaranteed" | "borrowed": kbit/s} each class of a port is assured, read from
    `tc class show dev <port>`."""
    return {CLASS_NAMES[classid]: round(float(number) * KBIT_PER_UNIT[unit])
            for classid, number, unit in CLASS_RATE.findall(class_text)}
