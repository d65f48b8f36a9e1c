"""k-ary fat-tree (Al-Fares et al.) with deterministic names, DPIDs, ports, MACs and IPs.

k pods; each has k/2 edge switches (the ToRs, "p<pod>e<i>") and k/2
aggregation switches ("p<pod>a<i>"); (k/2)^2 core switches ("c<i>"). Edge
ports 1..k/2 go to the pod's aggregation switches, then its hosts;
aggregation switch i's ports 1..k/2 go to the pod's edges and ports
k/2+1..k to cores (i-1)k/2+1..ik/2; core port p goes to pod p. Hosts are
numbered pod-major, edge-major (hosts_per_edge each, k/2 by default), so
k = 8 with hosts_per_edge = 6 is GRID's 80-switch, 192-server fat-tree.

From Python: FatTreeTopo(k=4, bw=20); from the Mininet CLI::

    mn --custom mininet_topos/fattree.py --topo fattree,4 \\
       --switch ovs,datapath=user,protocols=OpenFlow13 --link tc --controller remote,port=6653

Aggregator hosts hang off the switches marked programmable, as in spine-leaf:
aggregators="edges", "aggregation", "cores" (or "tor", "top", as for any fabric),
"all" or chosen switch names.
"""

import sys
from pathlib import Path

from mininet.topo import Topo

try:
    from mininet_topos.spineleaf import (add_aggregator, host_ip, host_mac,
                                         programmable_switches, validate_rate, validate_size)
except ImportError:   # `mn --custom` execs this file alone, without __file__: find its package
    sys.path.insert(0, str(Path(sys._getframe().f_code.co_filename).resolve().parents[1]))
    from mininet_topos.spineleaf import (add_aggregator, host_ip, host_mac,
                                         programmable_switches, validate_rate, validate_size)

CORE_DPID_BASE = 0x30000
AGGREGATION_DPID_BASE = 0x40000   # + 0x100 * pod + i
EDGE_DPID_BASE = 0x50000
MAX_K = 254


class FatTreeTopo(Topo):
    """bw: the switch links' rate in Mbit/s, or a list of k^3/2 rates, one per switch link
    in the order they are built (per pod: its aggregation-core links, then its
    edge-aggregation links); host_bw for host links (default: bw, or its largest)."""

    def build(self, k=4, hosts_per_edge=None, bw=20, host_bw=None, aggregators=None,
              aggregator_bw=None):
        validate_size("k", k)
        if k % 2 or k > MAX_K:
            raise ValueError("k must be even and at most %d, got %d" % (MAX_K, k))
        half = k // 2
        hosts_per_edge = half if hosts_per_edge is None else hosts_per_edge
        validate_size("hosts_per_edge", hosts_per_edge)
        link_bws = list(bw) if isinstance(bw, (list, tuple)) else [bw] * (k ** 3 // 2)
        if len(link_bws) != k ** 3 // 2:
            raise ValueError("bw needs one rate per switch link (%d), got %d"
                             % (k ** 3 // 2, len(link_bws)))
        for rate in link_bws:
            validate_rate("bw", rate)
        bw = max(link_bws)
        rates = iter(link_bws)
        host_bw = bw if host_bw is None else host_bw
        validate_rate("host_bw", host_bw)
        cores = [self.addSwitch("c%d" % c, dpid="%016x" % (CORE_DPID_BASE + c), role="core")
                 for c in range(1, half * half + 1)]
        edges, aggregation, number = [], [], 0
        for pod in range(1, k + 1):
            pod_aggregation = [self.addSwitch("p%da%d" % (pod, a), role="aggregation",
                                              dpid="%016x" % (AGGREGATION_DPID_BASE + pod * 0x100 + a))
                               for a in range(1, half + 1)]
            for a, switch in enumerate(pod_aggregation, start=1):
                for j in range(1, half + 1):
                    self.addLink(switch, cores[(a - 1) * half + j - 1], port1=half + j, port2=pod,
                                 bw=next(rates))
            for e in range(1, half + 1):
                edge = self.addSwitch("p%de%d" % (pod, e), role="edge",
                                      dpid="%016x" % (EDGE_DPID_BASE + pod * 0x100 + e))
                for a, switch in enumerate(pod_aggregation, start=1):
                    self.addLink(edge, switch, port1=a, port2=e, bw=next(rates))
                for port in range(half + 1, half + hosts_per_edge + 1):
                    number += 1
                    host = self.addHost("h%d" % number, ip="%s/8" % host_ip(number),
                                        mac=host_mac(number))
                    self.addLink(host, edge, port1=0, port2=port, bw=host_bw)
                edges.append(edge)
            aggregation += pod_aggregation
        groups = {"edges": edges, "aggregation": aggregation, "cores": cores}
        aggregator_bw = bw if aggregator_bw is None else float(aggregator_bw)
        validate_rate("aggregator_bw", aggregator_bw)
        for switch in programmable_switches(aggregators, groups, top="cores", tor="edges"):
            number += 1
            port = half + hosts_per_edge + 1 if switch in edges else k + 1
            add_aggregator(self, switch, number, port, aggregator_bw)


topos = {"fattree": FatTreeTopo}
