"""The InArt paper's toy example (Liu, ..., Fang et al., WWW 2024): two switches v1 and
v2, linked; workers w1-w4 and PS s1 on v1, workers w5-w6 and PS s2 on v2; an
aggregator host agg-vN on each switch.

In the paper every link is 6, each PS takes in 4 and each switch aggregates
6; here the same numbers are Mbit/s (link_bw, ps_bw, aggregator_bw): the PSs'
links and the aggregators' links are shaped to those rates, which enforces
the PS ingress and the aggregation capacity.

From Python: InartExampleTopo(); from the Mininet CLI::

    mn --custom mininet_topos/inart_example.py --topo inartexample \\
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

HOSTS_ON = {"v1": ["w1", "w2", "w3", "w4", "s1"], "v2": ["w5", "w6", "s2"]}
PSS = ["s1", "s2"]


class InartExampleTopo(Topo):
    def build(self, link_bw=6, ps_bw=4, aggregator_bw=6):
        for name, rate in (("link_bw", link_bw), ("ps_bw", ps_bw), ("aggregator_bw", aggregator_bw)):
            validate_rate(name, float(rate))
        for number, switch in enumerate(sorted(HOSTS_ON), start=1):
            self.addSwitch(switch, dpid="%016x" % number, role="switch")
        self.addLink("v1", "v2", port1=1, port2=1, bw=float(link_bw))
        number = 0
        for switch in sorted(HOSTS_ON):
            for port, host in enumerate(HOSTS_ON[switch], start=2):
                number += 1
                self.addHost(host, ip="%s/8" % host_ip(number), mac=host_mac(number))
                rate = ps_bw if host in PSS else link_bw
                self.addLink(host, switch, port1=0, port2=port, bw=float(rate))
        for switch in sorted(HOSTS_ON):
            number += 1
            add_aggregator(self, switch, number, len(HOSTS_ON[switch]) + 2, float(aggregator_bw))


topos = {"inartexample": InartExampleTopo}
