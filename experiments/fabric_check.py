"""Bring up a spine-leaf fabric under our controller and check it end to end.

Prints one JSON object: switches (connected and synced), links (inter-switch
cables), hosts, ping_loss_pct (all ordered pairs), tcp_mbps (iperf3 TCP between
the first host of the first and of the last leaf), link_mbps and tcp_ratio.

    python -m experiments.fabric_check --spines 8 --leaves 8 --hosts-per-leaf 2 --bw 20
"""

import json
import sys

from experiments.cli import build_fabric, experiment_parser, fabric_arguments, progress_printer
from experiments.host_measurements import ping_all_loss_pct, tcp_throughput_mbps
from experiments.testbed import FabricTestbed
from mininet_topos.platform_net import PlatformError
from mininet_topos.registry import fabric_hosts


def parse_args(argv):
    parser = experiment_parser("experiments.fabric_check", __doc__)
    fabric_arguments(parser, bw=20.0)
    parser.add_argument("--tcp-seconds", type=int, default=5, help="iperf3 duration")
    return parser.parse_args(argv)


def tcp_pair(topo):
    """The first host and the first one under another switch, so that TCP crosses the
    fabric (two hosts of one switch if there is only one; None if one host)."""
    hosts = fabric_hosts(topo)
    switch_of = {}
    for a, b in topo.links():
        switch_of.update({a: b} if a in hosts else {b: a} if b in hosts else {})
    far = next((h for h in hosts if switch_of[h] != switch_of[hosts[0]]), None)
    if far is not None:
        return hosts[0], far
    return (hosts[0], hosts[1]) if len(hosts) > 1 else None


say = progress_printer("fabric_check")


def check(args):
    topo = build_fabric(args)
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port, progress=say) as bed:
        report = bed.client.get("/fabric/topology")
        say("pinging all host pairs")
        loss = ping_all_loss_pct(bed.net)
        pair = tcp_pair(topo)
        tcp_mbps = None
        if pair is not None:
            say("TCP %s -> %s for %d s" % (*pair, args.tcp_seconds))
            tcp_mbps = tcp_throughput_mbps(bed.host(pair[0]), bed.host(pair[1]), args.tcp_seconds)
    return {
        "switches": sum(s["connected"] and s["synced"] for s in report["switches"]),
        "links": len(report["links"]),
        "hosts": len(report["hosts"]),
        "ping_loss_pct": loss,
        "tcp_pair": pair,
        "tcp_mbps": None if tcp_mbps is None else round(tcp_mbps, 2),
        "link_mbps": args.bw,
        "tcp_ratio": None if tcp_mbps is None else round(tcp_mbps / args.bw, 3),
    }


def main(argv=None):
    args = parse_args(argv)
    try:
        result = check(args)
    except (PlatformError, ValueError) as error:
        sys.exit("error: %s" % error)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
