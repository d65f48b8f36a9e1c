"""ovs-ofctl as the experiments and tests call it: OpenFlow 1.3, its output as lines."""

import subprocess


def ofctl(*arguments):
    """Run `ovs-ofctl -O OpenFlow13 ARGUMENTS`; returns what it prints."""
    return subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", *arguments],
                          capture_output=True, text=True, check=True).stdout


def ofctl_lines(*arguments):
    """What `ovs-ofctl -O OpenFlow13 ARGUMENTS` prints, without its reply headers."""
    return [line.strip() for line in ofctl(*arguments).splitlines()
            if line.strip() and " reply (" not in line]


def interface_bytes(name):
    """(bytes received, bytes sent) on a switch's interface, as OVS counts them."""
    statistics = subprocess.run(["ovs-vsctl", "get", "Interface", name, "statistics"],
                                capture_output=True, text=True, check=True).stdout
    counts = dict(item.split("=") for item in statistics.strip().strip("{}").split(", "))
    return int(counts["rx_bytes"]), int(counts["tx_bytes"])
