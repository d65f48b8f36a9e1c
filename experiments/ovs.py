"""ovs-ofctl as the experiments and tests call it: OpenFlow 1.3, its output as lines."""

import re
import subprocess


def ofctl(*arguments):
    """Run `ovs-ofctl -O OpenFlow13 ARGUMENTS`; returns what it prints."""
    return subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", *arguments],
                          capture_output=True, text=True, check=True).stdout


def ofctl_lines(*arguments):
    """What `ovs-ofctl -O OpenFlow13 ARGUMENTS` prints, without its reply headers."""
    return [line.strip() for line in ofctl(*arguments).splitlines()
            if line.strip() and " reply (" not in line]



def port_bytes(switch, port):
    """(bytes received, bytes sent) on a switch's port (its name), as the datapath counts
    them now (OpenFlow port statistics; OVSDB's are refreshed only every 5 s)."""
    reply = ofctl("dump-ports", switch, port)
    received = re.search(r"rx pkts=\d+, bytes=(\d+)", reply)
    sent = re.search(r"tx pkts=\d+, bytes=(\d+)", reply)
    if received is None or sent is None:
        raise RuntimeError("ovs-ofctl dump-ports %s %s gave no byte counts: %r"
                           % (switch, port, reply[:200]))
    return int(received.group(1)), int(sent.group(1))
