"""Multicast trees from a source host to receiver hosts with bandwidth b on every edge.

Links are directed and each has a residual: capacity minus what is reserved
(`reserved_mbps`). A tree is feasible for b when every edge's residual is
>= b. Measured load (`load_mbps`, e.g. from port statistics) does not decide
feasibility, since unreserved traffic is not protected and a just-released
tree's own traffic lingers in the measurement, but it steers the choice
among feasible trees: headroom is capacity minus max(reserved, load). The largest feasible b is the minimum,
over receivers, of the widest single path to each (Luo et al. 2019) among
the trees the policy builds (on a spine-leaf: up once, down once); an
infeasible request reports it.

Policies:
- path-aware, spine-leaf: a set cover over spines. Spine s covers remote
  leaf L when source-leaf->s and s->L both have residual >= b; greedily take
  the spine covering most uncovered leaves, ties to the most headroom, so a
  tree uses the fewest spines and trees spread over the least-loaded ones.
- path-aware, other graphs (tree_search.py): bandwidth-pruned shortest-path Steiner heuristic
  (Takahashi-Matsuyama) with edge weight 1 + utilization after adding b.
- random: the load-agnostic baseline; spine-leaf picks spines in random
  order, other graphs a random shortest-path tree. It still admits only
  edges with residual >= b, so it never oversubscribes a link.

A tree may carry backup uplinks (with_backup_uplinks) that its ingress switch fails
over to by itself; switch_shares says what each switch holds of a tree and its backups.
"""

import functools
import random as random_module
from collections import defaultdict
from dataclasses import dataclass, replace

import networkx as nx

from syncfabric.decisions.tree_search import pruned, random_shortest_path_tree, steiner_tree

PATH_AWARE = "path-aware"
CAPACITY_TOLERANCE_MBPS = 1e-9  # a load this small is no load (what float sums leave)
SUM_TOLERANCE = 1e-12      # of capacity: float sums of rates that fill a link exactly still fit
PLANNED_TOLERANCE = 1e-6   # of capacity: an LP's rates fill a link up to its solver's tolerance
RANDOM = "random"
POLICIES = (PATH_AWARE, RANDOM)


class TreeRequestError(ValueError):
    """The request itself is invalid (bad demand, receivers, policy)."""


class InfeasibleTree(Exception):
    """No tree carries the demand; `max_feasible_mbps` is the largest demand that fits."""

    def __init__(self, demand_mbps, max_feasible_mbps):
        super().__init__("no tree has %.3f Mbit/s free on every link; the largest feasible "
                         "bandwidth is %.3f Mbit/s" % (demand_mbps, max_feasible_mbps))
        self.demand_mbps = demand_mbps
        self.max_feasible_mbps = max_feasible_mbps


@dataclass(frozen=True)
class MulticastTree:
    source: str
    receivers: tuple
    edges: tuple          # directed (parent, child), each node has one parent
    bandwidth_mbps: float
    policy: str = PATH_AWARE
    backups: tuple = ()   # (switch, uplink neighbour, backup neighbour): see with_backup_uplinks

    def children(self):
        """{node: [child, ...]} for every node that forwards."""
        result = defaultdict(list)
        for parent, child in self.edges:
            result[parent].append(child)
        return dict(result)

    def parent(self):
        return {child: parent for parent, child in self.edges}


@dataclass(frozen=True)
class TreeShare:
    """One switch's part of a tree: packets entering on in_ports are replicated to
    out_ports; failover ((out port, backup port), ...) replaces an out port by its
    backup the moment its link dies, before the controller hears of it; police_mbps
    holds the tree to its reservation (on its ingress switch only, else None)."""
    in_ports: tuple
    out_ports: tuple
    failover: tuple = ()
    police_mbps: float = None


def switch_shares(view, tree):
    """{switch: TreeShare} for every switch on the tree or on its backup uplinks, in
    tree order. The tree is policed once, where it enters the fabric: identical meters
    in series would drop more than the excess of a sender above its rate."""
    parent, children = tree.parent(), tree.children()
    ingress = view.attachment(tree.source)[0]
    shares = {node: {"in": [view.out_port(node, parent[node])],
                     "out": [view.out_port(node, child) for child in children[node]],
                     "failover": [],
                     "police": tree.bandwidth_mbps if node == ingress else None}
              for node in dict.fromkeys(p for p, _ in tree.edges) if view.is_switch(node)}
    for switch, primary, backup in tree.backups:
        shares[switch]["failover"].append((view.out_port(switch, primary),
                                           view.out_port(switch, backup)))
        shares[backup] = {"in": [view.out_port(backup, switch)],
                          "out": [view.out_port(backup, child) for child in children[primary]],
                          "failover": [], "police": None}
        for child in children[primary]:
            shares[child]["in"].append(view.out_port(child, backup))
    return {node: TreeShare(tuple(share["in"]), tuple(share["out"]), tuple(share["failover"]),
                            share["police"])
            for node, share in shares.items()}


def backup_links(tree):
    """The directed links only the tree's backup uplinks use."""
    children = tree.children()
    return [link for switch, primary, backup in tree.backups
            for link in [(switch, backup)] + [(backup, child) for child in children[primary]]]


def with_backup_uplinks(view, tree, reserved_mbps=None, down_links=frozenset()):
    """`tree` with a precomputed backup for each uplink of its ingress switch (local
    repair): another neighbour of that switch, off the tree, linked (by links that are
    up) to every switch the uplink's neighbour feeds, so that a FAST_FAILOVER group can
    send the tree there the moment the uplink dies. Those with room for the tree's
    bandwidth come first, then the most headroom. Backups are not reserved: they carry
    the tree only until the controller moves it make-before-break. An uplink whose
    neighbour feeds hosts, or that no neighbour can stand in for (e.g. a fat-tree's
    aggregation switch feeding core switches), gets none."""
    residual = Residuals(view, reserved_mbps)
    ingress = view.attachment(tree.source)[0]
    children = tree.children()
    on_tree = {node for edge in tree.edges for node in edge}

    def usable(tail, head):
        return view.graph.has_edge(tail, head) and frozenset((tail, head)) not in down_links

    backups = []
    for primary in children.get(ingress, []):
        fed = children.get(primary, [])
        if not fed or not all(view.is_switch(child) for child in fed):
            continue
        taken = {backup for _, _, backup in backups}
        candidates = sorted((s for s in view.graph.successors(ingress) if view.is_switch(s)
                             and s not in on_tree and s not in taken and usable(ingress, s)
                             and all(usable(s, child) for child in fed)), key=view.dpid)

        def preference(spine):
            links = [(ingress, spine)] + [(spine, child) for child in fed]
            return (all(residual.fits(*link, tree.bandwidth_mbps) for link in links),
                    min(residual.headroom(*link) for link in links))
        backup = max(candidates, key=preference, default=None)   # max keeps the first of equals
        if backup is not None:
            backups.append((ingress, primary, backup))
    return replace(tree, backups=tuple(backups))


def fits_in(free, demand, capacity, planned=False):
    """Whether `demand` fits in what is `free` of `capacity`. What users ask for gets no
    tolerance beyond float sums': a request above a link's capacity or what is free, by
    any amount, does not fit. A planner's loads (`planned`: an LP's rates) may exceed
    what is free by the solver's tolerance; the book then books only what is free."""
    if planned:
        return free + PLANNED_TOLERANCE * capacity >= demand
    return demand <= capacity and free + SUM_TOLERANCE * capacity >= demand


class Residuals:
    """Per directed link: residual (capacity minus reserved) decides feasibility,
    headroom (capacity minus max(reserved, measured load)) decides preference."""

    def __init__(self, view, reserved_mbps=None, load_mbps=None):
        self.view = view
        self.reserved_mbps = reserved_mbps or {}
        self.load_mbps = load_mbps or {}

    def _capacity(self, tail, head):
        return self.view.graph.edges[tail, head]["capacity_mbps"]

    def _busy(self, tail, head):
        link = (tail, head)
        return max(self.reserved_mbps.get(link, 0.0), self.load_mbps.get(link, 0.0))

    def __call__(self, tail, head):
        return self._capacity(tail, head) - self.reserved_mbps.get((tail, head), 0.0)

    def fits(self, tail, head, demand):
        return fits_in(self(tail, head), demand, self._capacity(tail, head))

    def headroom(self, tail, head):
        return self._capacity(tail, head) - self._busy(tail, head)

    def utilization_after(self, tail, head, demand):
        return (self._busy(tail, head) + demand) / self._capacity(tail, head)


def validate_request(view, source, receivers, demand_mbps):
    if not view.is_host(source):
        raise TreeRequestError("source %r is not a host" % (source,))
    if not receivers:
        raise TreeRequestError("receivers must not be empty")
    for receiver in receivers:
        if not view.is_host(receiver):
            raise TreeRequestError("receiver %r is not a host" % (receiver,))
    if len(set(receivers)) != len(receivers):
        raise TreeRequestError("receivers must not repeat")
    aggregators = [h for h in receivers if view.is_aggregator(h)]
    if aggregators:   # they sum gradients: a tree may start at one (an in-network shard)
        raise TreeRequestError("%s is an aggregator, not a multicast receiver" % aggregators[0])
    if source in receivers:
        raise TreeRequestError("the source cannot be a receiver")
    if isinstance(demand_mbps, bool) or not isinstance(demand_mbps, (int, float)) or not demand_mbps > 0:
        raise TreeRequestError("bandwidth_mbps must be a positive number, got %r" % (demand_mbps,))


@functools.lru_cache(maxsize=8)   # a view never changes; every tree request asks (27 ms on 64x64)
def is_spine_leaf(view):
    """True if every switch is a spine or a leaf, links join leaves to spines only,
    and hosts hang off leaves: then trees are a set cover over spines."""
    roles = {s: view.graph.nodes[s]["role"] for s in view.switches}
    if set(roles.values()) != {"spine", "leaf"}:
        return False
    for tail, head, data in view.links():
        if data["kind"] == "fabric" and {roles[tail], roles[head]} != {"spine", "leaf"}:
            return False
        if data["kind"] == "host" and view.is_switch(tail) and roles[tail] != "leaf" \
                and not view.is_aggregator(head):   # aggregators may hang off spines
            return False
    return True


def max_feasible_mbps(view, source, receivers, reserved_mbps=None):
    """The largest b for which a tree of the family compute_tree builds reaches every
    receiver (0 if none), so that asking again for exactly b is granted. On a
    spine-leaf that family is one spine per remote leaf (up once, down once); on
    other graphs any tree."""
    residual = Residuals(view, reserved_mbps)
    if is_spine_leaf(view):
        return _spine_leaf_max_feasible(view, residual, source, receivers)
    levels = sorted({residual(u, v) for u, v in view.graph.edges if residual(u, v) > 0})
    best, low, high = 0.0, 0, len(levels) - 1
    while low <= high:  # reachability only shrinks as b grows: binary search
        middle = (low + high) // 2
        if _all_reachable(view, residual, source, receivers, levels[middle]):
            best, low = levels[middle], middle + 1
        else:
            high = middle - 1
    return best


def _spine_leaf_max_feasible(view, residual, source, receivers):
    """min over the host links and, per remote leaf, the best spine's min residual (from
    a source on a spine: its own link down to each leaf)."""
    source_leaf = view.attachment(source)[0]
    leaf_of = {r: view.attachment(r)[0] for r in receivers}
    best = min([residual(source, source_leaf)] + [residual(leaf_of[r], r) for r in receivers])
    if view.is_spine(source_leaf):
        return max(min([best] + [residual(source_leaf, leaf) if view.graph.has_edge(
            source_leaf, leaf) else 0.0 for leaf in set(leaf_of.values())]), 0.0)
    spines = [s for s in view.switches if view.is_spine(s)
              and view.graph.has_edge(source_leaf, s)]
    for leaf in set(leaf_of.values()) - {source_leaf}:
        best = min(best, max((min(residual(source_leaf, s), residual(s, leaf)) for s in spines
                              if view.graph.has_edge(s, leaf)), default=0.0))
    return max(best, 0.0)


def _all_reachable(view, residual, source, receivers, demand):
    return set(receivers) <= nx.descendants(pruned(view, residual, demand), source)


def compute_tree(view, source, receivers, demand_mbps, reserved_mbps=None, policy=PATH_AWARE,
                 rng=None, load_mbps=None):
    """A MulticastTree for the request, or InfeasibleTree / TreeRequestError."""
    receivers = tuple(receivers)
    validate_request(view, source, receivers, demand_mbps)
    if policy not in POLICIES:
        raise TreeRequestError("policy must be one of %s, got %r" % (", ".join(POLICIES), policy))
    residual = Residuals(view, reserved_mbps, load_mbps)
    rng = rng or random_module.Random()
    if is_spine_leaf(view):
        edges = _spine_leaf_tree(view, residual, source, receivers, demand_mbps,
                                 policy == RANDOM, rng)
    elif policy == RANDOM:
        edges = random_shortest_path_tree(view, residual, source, receivers, demand_mbps, rng)
    else:
        edges = steiner_tree(view, residual, source, receivers, demand_mbps)
    if edges is None:
        raise InfeasibleTree(demand_mbps, max_feasible_mbps(view, source, receivers, reserved_mbps))
    return MulticastTree(source, receivers, tuple(edges), float(demand_mbps), policy)


def without_links(view, reserved_mbps, down_links):
    """Reservations with both directions of every link in down_links (frozensets of its
    two nodes) counted as full: trees computed on them avoid those links."""
    if not down_links:
        return reserved_mbps
    reserved = dict(reserved_mbps)
    for link in down_links:
        tail, head = tuple(link)
        for edge in ((tail, head), (head, tail)):
            reserved[edge] = view.graph.edges[edge]["capacity_mbps"]
    return reserved


def repaired_tree(view, tree, reserved_mbps, down_links, rng=None):
    """`tree` computed again (same source, receivers, bandwidth and policy) on the fabric
    without down_links, its own bandwidth counted free (reserved_mbps includes it), so
    it may keep the links it had; InfeasibleTree if no tree fits."""
    reserved = dict(reserved_mbps)
    for edge in tree.edges:
        reserved[edge] = reserved.get(edge, 0.0) - tree.bandwidth_mbps
    return compute_tree(view, tree.source, tree.receivers, tree.bandwidth_mbps,
                        without_links(view, reserved, down_links), tree.policy, rng)


def _spine_leaf_tree(view, residual, source, receivers, demand, random_order, rng):
    source_leaf = view.attachment(source)[0]
    leaf_of = {r: view.attachment(r)[0] for r in receivers}
    host_links = [(source, source_leaf)] + [(leaf_of[r], r) for r in receivers]
    if not all(residual.fits(*link, demand) for link in host_links):
        return None
    if view.is_spine(source_leaf):   # an aggregator's tree: down once, to every leaf
        down = [(source_leaf, leaf) for leaf in sorted(set(leaf_of.values()), key=view.dpid)]
        if not all(view.graph.has_edge(*link) and residual.fits(*link, demand) for link in down):
            return None
        return host_links[:1] + down + host_links[1:]
    remote_leaves = sorted({leaf_of[r] for r in receivers} - {source_leaf}, key=view.dpid)
    spines = [s for s in view.switches if view.is_spine(s)]
    if random_order:
        rng.shuffle(spines)
    covers = {s: {leaf for leaf in remote_leaves if view.graph.has_edge(s, leaf)
                  and residual.fits(source_leaf, s, demand) and residual.fits(s, leaf, demand)}
              for s in spines if view.graph.has_edge(source_leaf, s)}
    uncovered, leaf_spine = set(remote_leaves), {}
    while uncovered:
        def gain(spine):
            newly = covers[spine] & uncovered
            if random_order or not newly:
                return (len(newly) > 0,)
            headroom = min([residual.headroom(source_leaf, spine)]
                           + [residual.headroom(spine, leaf) for leaf in newly])
            return (len(newly), headroom)
        spine = max(covers, key=gain, default=None)  # max() keeps the first of equals
        if spine is None or not covers[spine] & uncovered:
            return None
        for leaf in covers[spine] & uncovered:
            leaf_spine[leaf] = spine
        uncovered -= covers[spine]
    edges = [(source, source_leaf)]
    edges += [(source_leaf, s) for s in dict.fromkeys(leaf_spine[leaf] for leaf in remote_leaves)]
    edges += [(leaf_spine[leaf], leaf) for leaf in remote_leaves]
    edges += [(leaf_of[r], r) for r in receivers]
    return edges
