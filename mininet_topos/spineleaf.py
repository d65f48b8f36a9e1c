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

Aggregator hosts (in-network aggregation, syncfabric/decisions/ina_placement.py) hang off
the switches marked programmable: aggregators="leaves", "spines" (or "tor", "top", as
for any fabric), "all", or chosen switches ("leaf1+spine2" from mn, or a list), e.g.
`--topo spineleaf,8,8,2,aggregators=leaves,aggregator_bw=9`. The aggregator of
switch X is host "agg-X" (role "aggregator"), numbered after the workers, on
the switch's last port; its link is shaped to its processing capacity
aggregator_bw (Mbit/s), which enforces that capacity.
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
    for heterogeneous workers; a list for bw gives each leaf-spine link its
    own, leaf-major: leaf1-spine1, leaf1-spine2, ...); links are shaped to them
    (use a TCLink). With a list for bw, host_bw and aggregator_bw default to
    its largest rate.
    """

    def build(self, spines=2, leaves=2, hosts_per_leaf=1, bw=20, host_bw=None, aggregators=None,
              aggregator_bw=None):
        validate_size("spines", spines)
        validate_size("leaves", leaves)
        validate_size("hosts_per_leaf", hosts_per_leaf)
        host_count = hosts_per_leaf * leaves
        link_bws = list(bw) if isinstance(bw, (list, tuple)) else [bw] * (leaves * spines)
        if len(link_bws) != leaves * spines:
            raise ValueError("bw needs one rate per leaf-spine link (%d), got %d"
                             % (leaves * spines, len(link_bws)))
        for rate in link_bws:
            validate_rate("bw", rate)
        bw = max(link_bws)
        host_bw = bw if host_bw is None else host_bw
        host_bws = list(host_bw) if isinstance(host_bw, (list, tuple)) else [host_bw] * host_count
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
                self.addLink(leaf_name, spine_name, port1=s, port2=leaf,
                             bw=link_bws[(leaf - 1) * spines + s - 1])
            for k in range(1, hosts_per_leaf + 1):
                number = (leaf - 1) * hosts_per_leaf + k
                host = self.addHost("h%d" % number, ip="%s/8" % host_ip(number),
                                    mac=host_mac(number))
                self.addLink(host, leaf_name, port1=0, port2=spines + k, bw=host_bws[number - 1])
        programmable = programmable_switches(aggregators, {
            "spines": spine_names, "leaves": ["leaf%d" % leaf for leaf in range(1, leaves + 1)]},
            top="spines", tor="leaves")
        aggregator_bw = bw if aggregator_bw is None else float(aggregator_bw)
        validate_rate("aggregator_bw", aggregator_bw)
        for number, switch in enumerate(programmable, start=host_count + 1):
            port = spines + hosts_per_leaf + 1 if switch.startswith("leaf") else leaves + 1
            add_aggregator(self, switch, number, port, aggregator_bw)


def programmable_switches(aggregators, tiers, top, tor):
    """The switches that get an aggregator host, in a stable order: a tier's name (a key
    of `tiers`, {name: [switch, ...]}), "all", or chosen switches (a list, or names
    joined by "+"). "top" and "tor" name the fabric's top tier and its top-of-rack tier
    (`top` and `tor`: keys of `tiers`), so that an experiment can ask any fabric for
    aggregators in the same words."""
    if aggregators in (None, "none", ""):
        return []
    groups = dict(tiers, all=[s for switches in tiers.values() for s in switches],
                  top=tiers[top], tor=tiers[tor])
    if isinstance(aggregators, str) and aggregators in groups:
        return groups[aggregators]
    chosen = aggregators.split("+") if isinstance(aggregators, str) else list(aggregators)
    unknown = sorted(set(chosen) - set(groups["all"]))
    if unknown:
        raise ValueError("aggregators: no switch named %s (give %s, all or switch names)"
                         % (", ".join(unknown), ", ".join(tiers)))
    return [s for s in groups["all"] if s in chosen]


def add_aggregator(topo, switch, number, port, capacity_mbps):
    """Host agg-<switch>: an aggregator whose link is shaped to its capacity."""
    name = "agg-%s" % switch
    topo.addHost(name, ip="%s/8" % host_ip(number), mac=host_mac(number), role="aggregator",
                 aggregation_mbps=capacity_mbps)
    topo.addLink(name, switch, port1=0, port2=port, bw=capacity_mbps)
    return name


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
    parser.add_argument("--aggregators", default=None,
                        help="switches with an aggregator host: leaves, spines, all, or names "
                             "joined by + (default: none)")
    parser.add_argument("--aggregator-bw", type=float, default=None,
                        help="aggregator capacity (and link rate), Mbit/s (default: --bw)")
    return parser.parse_args(argv)


def main(argv=None):
    from mininet_topos.description import describe  # not at top: `mn --custom` loads this file alone
    args = parse_args(argv)
    try:
        topo = SpineLeafTopo(spines=args.spines, leaves=args.leaves,
                             hosts_per_leaf=args.hosts_per_leaf, bw=args.bw, host_bw=args.host_bw,
                             aggregators=args.aggregators, aggregator_bw=args.aggregator_bw)
    except ValueError as error:
        sys.exit("error: %s" % error)
    json.dump(describe(topo), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
