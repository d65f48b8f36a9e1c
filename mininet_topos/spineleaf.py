"""Parameterized spine-leaf fabric with deterministic names, DPIDs, ports, MACs and IPs.

Every leaf connects to every spine. Leaf ports 1..S go to spines 1..S, leaf
ports S+1..S+H to its hosts; spine port l goes to leaf l. Hosts are numbered
leaf-major (h1..hH under leaf1, ...), so a host's number fixes its MAC and IP.

From Python::

    topo = SpineLeafTopo(spines=8, leaves=8, hosts_per_leaf=2, bw=20)

From the Mininet CLI (userspace datapath, see PLATFORM.md)::

    mn --custom mininet_topos/spineleaf.py --topo spineleaf,8,8,2 \\
       --switch ovs,datapath=user,protocols=OpenFlow13 --link tc \\
       --controller remote,port=6653
"""

import argparse
import ipaddress
import json
import sys

from mininet.topo import Topo

SPINE_DPID_BASE = 0x1000
LEAF_DPID_BASE = 0x2000
MAX_SWITCHES_PER_TIER = 0xFFF
HOST_NETWORK = ipaddress.ip_network("10.0.0.0/8")


def host_mac(number):
    """MAC of host `number` (1-based): its number in the low bytes."""
    return ":".join("%02x" % b for b in number.to_bytes(6, "big"))


def host_ip(number):
    """IP of host `number` (1-based) inside 10.0.0.0/8."""
    return str(HOST_NETWORK.network_address + number)


def validate_size(name, value):
    """A tier size must be a positive integer that fits the DPID scheme."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SWITCHES_PER_TIER:
        raise ValueError("%s must be an integer between 1 and %d, got %r"
                         % (name, MAX_SWITCHES_PER_TIER, value))


def validate_rate(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError("%s must be a positive number of Mbit/s, got %r" % (name, value))


class SpineLeafTopo(Topo):
    """spines x leaves fabric with hosts_per_leaf hosts under each leaf.

    bw is the spine-leaf link rate and host_bw the host link rate, in Mbit/s
    (host_bw defaults to bw; a list gives each host h1, h2, ... its own rate,
    for heterogeneous workers); links are shaped to them (use a TCLink).
    """

    def build(self, spines=2, leaves=2, hosts_per_leaf=1, bw=20, host_bw=None):
        validate_size("spines", spines)
        validate_size("leaves", leaves)
        validate_size("hosts_per_leaf", hosts_per_leaf)
        host_count = hosts_per_leaf * leaves
        host_bw = bw if host_bw is None else host_bw
        host_bws = list(host_bw) if isinstance(host_bw, (list, tuple)) else [host_bw] * host_count
        validate_rate("bw", bw)
        if len(host_bws) != host_count:
            raise ValueError("host_bw needs one rate per host (%d), got %d" % (host_count, len(host_bws)))
        for rate in host_bws:
            validate_rate("host_bw", rate)
        if hosts_per_leaf * leaves >= HOST_NETWORK.num_addresses - 2:
            raise ValueError("too many hosts for %s" % HOST_NETWORK)

        spine_names = [self.addSwitch("spine%d" % s, dpid="%016x" % (SPINE_DPID_BASE + s),
                                      role="spine")
                       for s in range(1, spines + 1)]
        for leaf in range(1, leaves + 1):
            leaf_name = self.addSwitch("leaf%d" % leaf, dpid="%016x" % (LEAF_DPID_BASE + leaf),
                                       role="leaf")
            for s, spine_name in enumerate(spine_names, start=1):
                self.addLink(leaf_name, spine_name, port1=s, port2=leaf, bw=bw)
            for k in range(1, hosts_per_leaf + 1):
                number = (leaf - 1) * hosts_per_leaf + k
                host = self.addHost("h%d" % number, ip="%s/8" % host_ip(number),
                                    mac=host_mac(number))
                self.addLink(host, leaf_name, port1=0, port2=spines + k, bw=host_bws[number - 1])


topos = {"spineleaf": SpineLeafTopo}


def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Print the JSON fabric description of a spine-leaf topology "
                    "(what PUT /fabric/topology expects).")
    parser.add_argument("spines", type=int)
    parser.add_argument("leaves", type=int)
    parser.add_argument("hosts_per_leaf", type=int)
    parser.add_argument("--bw", type=float, default=20, help="spine-leaf link rate, Mbit/s")
    parser.add_argument("--host-bw", type=float, default=None, help="host link rate, Mbit/s")
    return parser.parse_args(argv)


def main(argv=None):
    from mininet_topos.description import describe  # not at top: `mn --custom` loads this file alone
    args = parse_args(argv)
    try:
        topo = SpineLeafTopo(spines=args.spines, leaves=args.leaves,
                             hosts_per_leaf=args.hosts_per_leaf, bw=args.bw, host_bw=args.host_bw)
    except ValueError as error:
        sys.exit("error: %s" % error)
    json.dump(describe(topo), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
