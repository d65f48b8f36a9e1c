"""Unicast IPv4 routes over a multipath fabric, as per-switch forwarding rules.

Each ordered host pair follows one shortest switch path. Pairs are taken in
a fixed order and each takes the equal-cost path whose busiest link carries
the fewest pairs so far (ties: fewest in total, then the first path in sorted
order). So a leaf's uplinks and downlinks carry equally many pairs, and the
same fabric always yields the same paths: ECMP's spreading, with paths the
controller knows.

Rules match the destination only where every source agrees on the next hop
at that switch (e.g. on spines and at the destination leaf) and
source+destination elsewhere, which keeps tables small.
"""

from collections import Counter, defaultdict
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


def host_pair_paths(view, down_links=frozenset(), pairs=None):
    """{(src_host, dst_host): [switch, ...]} for every ordered pair of distinct hosts that
    the fabric without `down_links` (frozensets of two switches) still joins; with
    `pairs`, for those only (balanced among themselves; e.g. one PS's flows at a scale
    where all pairs would be too many)."""
    graph = nx.Graph(view.switch_graph)
    graph.remove_edges_from(tuple(link) for link in down_links)
    hosts = view.hosts
    switch_of = {h: view.attachment(h)[0] for h in hosts}
    candidates = {}
    pairs_on_link = Counter()
    paths = {}
    if pairs is None:
        pairs = [(src, dst) for src in hosts for dst in hosts if src != dst]
    for src, dst in pairs:
        ends = (switch_of[src], switch_of[dst])
        if ends not in candidates:
            try:
                candidates[ends] = sorted(nx.all_shortest_paths(graph, *ends))
            except nx.NetworkXNoPath:
                candidates[ends] = []
        if not candidates[ends]:
            continue

        def crowding(path):
            loads = [pairs_on_link[link] for link in zip(path, path[1:])]
            return (max(loads, default=0), sum(loads))

        path = min(candidates[ends], key=crowding)
        pairs_on_link.update(zip(path, path[1:]))
        paths[src, dst] = path
    return paths


def unicast_rules(view, down_links=frozenset()):
    """The sorted list of ForwardingRules that realize host_pair_paths(view, down_links)."""
    next_port = defaultdict(dict)  # (switch, dst_host) -> {src_host: out_port}
    for (src, dst), path in host_pair_paths(view, down_links).items():
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


class RoutesAround:
    """{switch: [ForwardingRule]} of a view's unicast routes around a set of down links,
    kept for the last `kept` sets (and always for none down): a flapping link costs one
    computation, and a long run of failures no unbounded memory."""

    def __init__(self, view, kept):
        self.view, self.kept = view, kept
        self.cache = {frozenset(): self._compute(frozenset())}

    def __call__(self, down):
        if down not in self.cache:
            if len(self.cache) > self.kept:
                oldest = next(key for key in self.cache if key)
                del self.cache[oldest]
            self.cache[down] = self._compute(down)
        return self.cache[down]

    def _compute(self, down):
        rules = defaultdict(list)
        for rule in unicast_rules(self.view, down):
            rules[rule.switch].append(rule)
        return rules

