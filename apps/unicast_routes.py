"""Unicast IPv4 routes over a multipath fabric, as per-switch forwarding rules.

Each ordered host pair follows one shortest switch path. Among the k
equal-cost paths (sorted), the pair (src, dst) takes number
(src's rank + dst's rank among all hosts) mod k: a Latin square, so one
host's destinations, one host's sources, a leaf's uplinks and its downlinks
all spread over the spines, and the same fabric always yields the same
paths: ECMP's spreading, with paths the controller knows.

Rules match the destination only where every source agrees on the next hop
at that switch (e.g. on spines and at the destination leaf) and
source+destination elsewhere, which keeps tables small.
"""

from collections import defaultdict
from dataclasses import dataclass
from typing import Optional

import networkx as nx


@dataclass(frozen=True, order=True)
class ForwardingRule:
    """At `switch`, IPv4 packets to `dst_ip` (from `src_ip`, if set) leave by `out_port`."""
    switch: str
    dst_ip: str
    src_ip: Optional[str]
    out_port: int


def host_pair_paths(view):
    """{(src_host, dst_host): [switch, ...]} for every ordered pair of distinct hosts."""
    hosts = view.hosts
    switch_of = {h: view.attachment(h)[0] for h in hosts}
    candidates = {}
    paths = {}
    for dst_rank, dst in enumerate(hosts):
        for src_rank, src in enumerate(hosts):
            if src == dst:
                continue
            ends = (switch_of[src], switch_of[dst])
            if ends not in candidates:
                candidates[ends] = sorted(nx.all_shortest_paths(view.switch_graph, *ends))
            choices = candidates[ends]
            paths[src, dst] = choices[(src_rank + dst_rank) % len(choices)]
    return paths


def unicast_rules(view):
    """The sorted list of ForwardingRules that realize host_pair_paths(view)."""
    next_port = defaultdict(dict)  # (switch, dst_host) -> {src_host: out_port}
    for (src, dst), path in host_pair_paths(view).items():
        hops = path + [dst]
        for here, there in zip(hops, hops[1:]):
            next_port[here, dst][src] = view.out_port(here, there)
    rules = []
    for (switch, dst), port_by_source in next_port.items():
        ports = set(port_by_source.values())
        if len(ports) == 1:
            rules.append(ForwardingRule(switch, view.ip(dst), None, ports.pop()))
        else:
            rules.extend(ForwardingRule(switch, view.ip(dst), view.ip(src), port)
                         for src, port in port_by_source.items())
    return sorted(rules, key=lambda r: (r.switch, r.dst_ip, r.src_ip or "", r.out_port))
