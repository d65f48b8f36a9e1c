"""The controller's view of the fabric: a validated description as a networkx graph.

A description is JSON (see mininet_topos/description.py)::

    {"switches": [{"name", "dpid", "role"}],
     "links":    [{"a", "a_port", "b", "b_port", "capacity_mbps"}],   # switch-switch cables
     "hosts":    [{"name", "ip", "mac", "switch", "port", "capacity_mbps",
                   "role", "aggregation_mbps"}]}

A host's role is "host" (the default) or "aggregator": a host attached to a
programmable switch that sums gradients (OpenFlow switches cannot add), with
its processing capacity `aggregation_mbps` (default: its link capacity).

The graph is directed, one edge per direction of every cable, because links
are full duplex and load, reservations and utilization are per direction.
Each edge carries `port` (the output port at its tail, None when the tail is
a host), `capacity_mbps` and `kind` ("fabric" or "host").
"""

import ipaddress
import re

import networkx as nx

MAC_PATTERN = re.compile(r"^([0-9a-f]{2}:){5}[0-9a-f]{2}$")
AGGREGATOR = "aggregator"
MAX_PORT = 0xffffff00   # OFPP_MAX: the highest OpenFlow 1.3 port number of a real port
HOST_ROLES = ("host", AGGREGATOR)
MIN_CAPACITY_MBPS = 1e-9   # what a full link offers a planner, which needs capacity > 0


class FabricError(ValueError):
    """The description (or a request naming parts of it) cannot be used."""


def _require(condition, message, *args):
    if not condition:
        raise FabricError(message % args)


def _field(item, key, kind, where):
    _require(isinstance(item, dict), "%s must be an object, got %r", where, item)
    _require(key in item, "%s is missing %r", where, key)
    value = item[key]
    _require(isinstance(value, kind) and not isinstance(value, bool),
             "%s: %r must be %s, got %r", where, key, getattr(kind, "__name__", "a number"), value)
    return value


def _positive_port(item, key, where):
    port = _field(item, key, int, where)
    _require(0 < port <= MAX_PORT, "%s: %r must be a port number in 1..%d, got %r", where, key,
             MAX_PORT, port)
    return port


def _capacity(item, where):
    capacity = _field(item, "capacity_mbps", (int, float), where)
    _require(capacity > 0, "%s: capacity_mbps must be positive, got %r", where, capacity)
    return float(capacity)


class FabricView:
    """Switches, hosts and directed links of one fabric, with lookups by dpid, IP and MAC."""

    def __init__(self, description):
        _require(isinstance(description, dict), "a fabric description must be a JSON object")
        for key in ("switches", "links", "hosts"):
            _require(isinstance(description.get(key), list), "description needs a %r list", key)
        self.graph = nx.DiGraph()
        self.switch_by_dpid = {}
        self.host_by_ip = {}
        self.host_by_mac = {}
        self._used_ports = set()
        for index, item in enumerate(description["switches"]):
            self._add_switch(item, "switches[%d]" % index)
        for index, item in enumerate(description["links"]):
            self._add_link(item, "links[%d]" % index)
        for index, item in enumerate(description["hosts"]):
            self._add_host(item, "hosts[%d]" % index)
        _require(self.switch_by_dpid, "description has no switches")
        self._neighbour_at = {(tail, data["port"]): head
                              for tail, head, data in self.graph.edges(data=True)
                              if data["port"] is not None}
        _require(nx.is_strongly_connected(self.graph), "the fabric is not connected")
        self.switch_graph = self.graph.subgraph(self.switch_by_dpid.values())

    def _add_switch(self, item, where):
        name = _field(item, "name", str, where)
        dpid = _field(item, "dpid", int, where)
        _require(name not in self.graph, "%s: duplicate node name %r", where, name)
        _require(0 < dpid < 2 ** 64, "%s: dpid must be in 1..2^64-1, got %r", where, dpid)
        _require(dpid not in self.switch_by_dpid, "%s: duplicate dpid %r", where, dpid)
        role = item.get("role", "switch")
        _require(isinstance(role, str), "%s: 'role' must be str, got %r", where, role)
        self.graph.add_node(name, kind="switch", dpid=dpid, role=role)
        self.switch_by_dpid[dpid] = name

    def _claim_port(self, switch, port, where):
        _require(self.is_switch(switch), "%s: unknown switch %r", where, switch)
        _require((switch, port) not in self._used_ports, "%s: port %d of %s is used twice",
                 where, port, switch)
        self._used_ports.add((switch, port))

    def _add_link(self, item, where):
        a, b = _field(item, "a", str, where), _field(item, "b", str, where)
        a_port, b_port = _positive_port(item, "a_port", where), _positive_port(item, "b_port", where)
        capacity = _capacity(item, where)
        _require(a != b, "%s: a link cannot connect %r to itself", where, a)
        self._claim_port(a, a_port, where)
        self._claim_port(b, b_port, where)
        _require(not self.graph.has_edge(a, b), "%s: %s and %s are linked twice", where, a, b)
        self.graph.add_edge(a, b, port=a_port, capacity_mbps=capacity, kind="fabric")
        self.graph.add_edge(b, a, port=b_port, capacity_mbps=capacity, kind="fabric")

    def _add_host(self, item, where):
        name, switch = _field(item, "name", str, where), _field(item, "switch", str, where)
        ip, mac = _field(item, "ip", str, where), _field(item, "mac", str, where).lower()
        port, capacity = _positive_port(item, "port", where), _capacity(item, where)
        role = item.get("role", "host")
        _require(role in HOST_ROLES, "%s: 'role' must be one of %s, got %r", where,
                 ", ".join(HOST_ROLES), role)
        attributes = {"role": role}
        aggregation = item.get("aggregation_mbps", capacity)
        _require(isinstance(aggregation, (int, float)) and not isinstance(aggregation, bool)
                 and aggregation > 0, "%s: aggregation_mbps must be positive, got %r",
                 where, aggregation)
        if role == AGGREGATOR:
            attributes["aggregation_mbps"] = float(aggregation)
        _require(name not in self.graph, "%s: duplicate node name %r", where, name)
        try:
            ip = str(ipaddress.IPv4Address(ip))
        except ipaddress.AddressValueError:
            raise FabricError("%s: %r is not an IPv4 address" % (where, ip)) from None
        _require(MAC_PATTERN.fullmatch(mac), "%s: %r is not a MAC address", where, mac)
        _require(ip not in self.host_by_ip, "%s: duplicate IP %s", where, ip)
        _require(mac not in self.host_by_mac, "%s: duplicate MAC %s", where, mac)
        self._claim_port(switch, port, where)
        self.graph.add_node(name, kind="host", ip=ip, mac=mac, **attributes)
        self.graph.add_edge(switch, name, port=port, capacity_mbps=capacity, kind="host")
        self.graph.add_edge(name, switch, port=None, capacity_mbps=capacity, kind="host")
        self.host_by_ip[ip] = name
        self.host_by_mac[mac] = name

    def is_switch(self, node):
        return self.graph.nodes.get(node, {}).get("kind") == "switch"

    def is_host(self, node):
        return self.graph.nodes.get(node, {}).get("kind") == "host"

    def is_spine(self, node):
        return self.graph.nodes.get(node, {}).get("role") == "spine"

    def is_aggregator(self, node):
        return self.graph.nodes.get(node, {}).get("role") == AGGREGATOR

    @property
    def aggregators(self):
        """{aggregator host: processing capacity in Mbit/s}."""
        found = [h for h in self.host_by_ip.values() if self.is_aggregator(h)]
        return {h: self.graph.nodes[h]["aggregation_mbps"] for h in sorted(found, key=self.ip_order)}

    @property
    def switches(self):
        return sorted(self.switch_by_dpid.values(), key=self.dpid)

    @property
    def hosts(self):
        return sorted(self.host_by_ip.values(), key=self.ip_order)

    def ip_order(self, host):
        """Hosts sort by their addresses."""
        return ipaddress.IPv4Address(self.ip(host))

    def dpid(self, switch):
        return self.graph.nodes[switch]["dpid"]

    def ip(self, host):
        return self.graph.nodes[host]["ip"]

    def mac(self, host):
        return self.graph.nodes[host]["mac"]

    def attachment(self, host):
        """(switch, port) where `host` plugs in."""
        (switch,) = self.graph.successors(host)
        return switch, self.graph.edges[switch, host]["port"]

    def host_ports(self, switch):
        """Ports of `switch` that face hosts."""
        return sorted(self.graph.edges[switch, host]["port"]
                      for host in self.graph.successors(switch) if self.is_host(host))

    def fabric_ports(self, switch):
        """Ports of `switch` that face other switches."""
        return sorted(self.graph.edges[switch, n]["port"] for n in self.graph.successors(switch)
                      if self.graph.edges[switch, n]["kind"] == "fabric")

    def out_port(self, node, neighbour):
        return self.graph.edges[node, neighbour]["port"]

    def neighbour_at(self, switch, port):
        """The switch or host at the other end of `switch`'s `port`, or None."""
        return self._neighbour_at.get((switch, port))

    def fabric_neighbour(self, switch, port):
        """The switch at the other end of `switch`'s `port`, or None (a host port, or unknown)."""
        neighbour = self.neighbour_at(switch, port)
        return neighbour if self.is_switch(neighbour) else None

    def fabric_links_of(self, switch):
        """The fabric links of `switch`, each as a frozenset of its two ends."""
        return {frozenset((switch, n)) for n in self.graph.successors(switch)
                if self.graph.edges[switch, n]["kind"] == "fabric"}

    def links(self):
        """Every directed link as (tail, head, edge attributes), in a stable order."""
        return sorted(self.graph.edges(data=True), key=lambda edge: (edge[0], edge[1]))

    def to_description(self):
        """The normalized description this view was built from."""
        switches = [{"name": s, "dpid": self.dpid(s), "role": self.graph.nodes[s]["role"]}
                    for s in self.switches]
        links = [{"a": a, "a_port": data["port"], "b": b, "b_port": self.out_port(b, a),
                  "capacity_mbps": data["capacity_mbps"]}
                 for a, b, data in self.links() if data["kind"] == "fabric" and a < b]
        hosts = []
        for host in self.hosts:
            switch, port = self.attachment(host)
            hosts.append({"name": host, "ip": self.ip(host), "mac": self.mac(host), "switch": switch,
                          "port": port, "capacity_mbps": self.graph.edges[switch, host]["capacity_mbps"]})
            if self.is_aggregator(host):
                hosts[-1].update(role=AGGREGATOR,
                                 aggregation_mbps=self.graph.nodes[host]["aggregation_mbps"])
        return {"switches": switches, "links": links, "hosts": hosts}


def available_graph(view, reserved_mbps, down_links):
    """The fabric's graph without the links that are down, each link's capacity what is
    left unreserved (at least MIN_CAPACITY_MBPS: the planners need capacity > 0)."""
    graph = view.graph.copy()
    graph.remove_edges_from([pair for link in down_links for pair in (tuple(link),
                                                                        tuple(link)[::-1])])
    for tail, head, data in graph.edges(data=True):
        free = data["capacity_mbps"] - reserved_mbps.get((tail, head), 0.0)
        data["capacity_mbps"] = max(MIN_CAPACITY_MBPS, free)
    return graph
