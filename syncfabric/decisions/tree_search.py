"""How a multicast tree's edges are found on a fabric that is not a spine-leaf
(multicast_trees.compute_tree chooses): the path-aware policy's Steiner heuristic, and
the random policy's shortest paths. `residual` is multicast_trees.Residuals: what each
link has left, and how loaded it would be."""

import networkx as nx


def pruned(view, residual, demand):
    """The fabric without links whose residual is below demand. Hosts never relay in
    paths over it: each host has a single link (FabricView), so no simple path
    passes through one."""
    return nx.subgraph_view(view.graph, filter_edge=lambda u, v: residual.fits(u, v, demand))


def steiner_tree(view, residual, source, receivers, demand):
    """The path-aware tree's edges: receivers joined one at a time, the nearest first, by
    the path from the tree that loads the links it uses least (each hop 1, plus the
    link's utilization after `demand`); None if one cannot be reached."""
    graph = pruned(view, residual, demand)

    def weight(u, v, _data):
        return 1.0 + residual.utilization_after(u, v, demand)

    # the tree's nodes by their hops from the source: Dijkstra starts from them in that
    # order, so that of two equally good paths the one from nearer the source is taken.
    # From a set, the order followed the process's hash seed: the GRID example's return
    # tree went one way or the other by chance, and its plan's rate with it (3.0 or 2.44)
    depth, edges = {source: 0}, []
    remaining = set(receivers)
    while remaining:
        distances, paths = nx.multi_source_dijkstra(
            graph, sorted(depth, key=lambda node: (depth[node], node)), weight=weight)
        reachable = [r for r in remaining if r in distances]
        if len(reachable) < len(remaining):
            return None
        nearest = min(reachable, key=lambda r: (distances[r], r))
        path = paths[nearest]
        edges.extend(zip(path, path[1:]))
        for hop, node in enumerate(path):
            depth.setdefault(node, depth[path[0]] + hop)
        remaining -= set(depth)
    return edges


def random_shortest_path_tree(view, residual, source, receivers, demand, rng):
    """The random policy's edges: every node's parent drawn among its neighbours one hop
    nearer the source, on links that fit `demand`; None if a receiver cannot be reached."""
    graph = pruned(view, residual, demand)
    hops = nx.single_source_shortest_path_length(graph, source)
    if any(r not in hops for r in receivers):
        return None
    parent = {}
    for node in sorted(hops, key=hops.get):
        if node != source:
            options = sorted(p for p in graph.predecessors(node) if hops.get(p) == hops[node] - 1)
            parent[node] = rng.choice(options)
    edges, needed = set(), list(receivers)
    while needed:
        node = needed.pop()
        if node != source and (parent[node], node) not in edges:
            edges.add((parent[node], node))
            needed.append(parent[node])
    return sorted(edges, key=lambda e: (hops[e[0]], e))
