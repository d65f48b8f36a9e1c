"""The GRID paper's worked example (Fang et al., IEEE/ACM ToN 2023): a triangle of
switches s1, s2, s3 (links s1-s3, s1-s2, s2-s3); workers w1-w4 on s1, w5-w6
on s2, w7-w8 and the PS on s3; an aggregator host agg-sN on every switch.

In the paper links are 3 Gbit/s, the PS ingress 9 and each switch aggregates
9; here the same numbers are Mbit/s (link_bw, ps_bw, aggregator_bw): the PS's
link and every aggregator's link are shaped to those rates, which enforces
the PS ingress and the aggregation capacity. Worker links (worker_bw) are not
a bottleneck in the example.

From Python: GridExampleTopo(); from the Mininet CLI::

    mn --custom mininet_topos/grid_example.py --topo gridexample \\
       --switch ovs,datapath=user,protocols=OpenFlow13 --link tc --controller remote,port=6653
"""

import sys
from pathlib import Path

from mininet.topo import Topo

try:
    from mininet_topos.spineleaf import add_aggregator, host_ip, host_mac, validate_rate
except ImportError:   # `mn --custom` execs this file alone, without __file__: find its package
    sys.path.insert(0, str(Path(sys._getframe().f_code.co_filename).resolve().parents[1]))
    from mininet_topos.spineleaf import add_aggregator, host_ip, host_mac, validate_rate

WORKERS_ON = {"s1": ["w1", "w2", "w3", "w4"], "s2": ["w5", "w6"], "s3": ["w7", "w8"]}
PS_SWITCH = "s3"
TRIANGLE = [("s1", "s3"), ("s1", "s2"), ("s2", "s3")]


class GridExampleTopo(Topo):
    def build(self, link_bw=3, ps_bw=9, aggregator_bw=9, worker_bw=9):
        for name, rate in (("link_bw", link_bw), ("ps_bw", ps_bw),
                           ("aggregator_bw", aggregator_bw), ("worker_bw", worker_bw)):
            validate_rate(name, float(rate))
        next_port = {}
        for number, switch in enumerate(sorted(WORKERS_ON), start=1):
            self.addSwitch(switch, dpid="%016x" % number, role="switch")
            next_port[switch] = 1
        for a, b in TRIANGLE:
            self.addLink(a, b, port1=next_port[a], port2=next_port[b], bw=float(link_bw))
            next_port[a] += 1
            next_port[b] += 1
        number = 0
        for switch in sorted(WORKERS_ON):
            for host in WORKERS_ON[switch] + (["ps"] if switch == PS_SWITCH else []):
                number += 1
                self.addHost(host, ip="%s/8" % host_ip(number), mac=host_mac(number))
                rate = ps_bw if host == "ps" else worker_bw
                self.addLink(host, switch, port1=0, port2=next_port[switch], bw=float(rate))
                next_port[switch] += 1
        for switch in sorted(WORKERS_ON):
            number += 1
            add_aggregator(self, switch, number, next_port[switch], float(aggregator_bw))
            next_port[switch] += 1


topos = {"gridexample": GridExampleTopo}
