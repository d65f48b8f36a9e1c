"""Benchmark: multicast tree computation time, ours against networkx's Steiner approximation.

For each case (a spine-leaf, one source, every other host a receiver, random
reservations already on the links) both compute a tree on the same graph
pruned to links with room for the demand; the median of repeated runs is
printed as one JSON object per case:

    python -m experiments.bench_trees              # 8x8 (63 receivers) and 64x64 (4095 receivers)
"""

import json
import random
import statistics
import time

import networkx as nx
from networkx.algorithms.approximation import steiner_tree
from tqdm import tqdm

from experiments.cli import experiment_parser
from mininet_topos.description import describe
from mininet_topos.spineleaf import SpineLeafTopo
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.multicast_trees import compute_tree

CASES = {"8x8": (8, 8, 8), "64x64": (64, 64, 64)}
DEMAND_MBPS = 2.0


def random_reservations(view, rng, link_mbps):
    """Up to 80% of every fabric link already reserved, so pruning matters."""
    return {(u, v): rng.uniform(0, 0.8 * link_mbps) for u, v, data in view.links()
            if data["kind"] == "fabric"}


def networkx_tree(view, reserved, source, receivers):
    pruned = nx.subgraph_view(view.graph, filter_edge=lambda u, v: (
        view.graph.edges[u, v]["capacity_mbps"] - reserved.get((u, v), 0.0) >= DEMAND_MBPS))
    return steiner_tree(pruned.to_undirected(as_view=True), [source] + receivers, method="mehlhorn")


def median_ms(function, repeats):
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def bench(case, repeats, seed=1, link_mbps=20.0):
    spines, leaves, hosts_per_leaf = CASES[case]
    view = FabricView(describe(SpineLeafTopo(spines=spines, leaves=leaves,
                                             hosts_per_leaf=hosts_per_leaf, bw=link_mbps)))
    reserved = random_reservations(view, random.Random(seed), link_mbps)
    source, receivers = view.hosts[0], view.hosts[1:]
    ours = median_ms(lambda: compute_tree(view, source, receivers, DEMAND_MBPS, reserved), repeats)
    theirs = median_ms(lambda: networkx_tree(view, reserved, source, receivers), max(1, repeats // 5))
    return {"case": case, "receivers": len(receivers), "ours_ms": round(ours, 3),
            "networkx_ms": round(theirs, 3), "speedup": round(theirs / ours, 1), "repeats": repeats}


def main(argv=None):
    parser = experiment_parser("experiments.bench_trees", __doc__)
    parser.add_argument("--cases", default=",".join(CASES), help="comma list of %s" % ", ".join(CASES))
    parser.add_argument("--repeats", type=int, default=25, help="runs of ours per case (networkx: 1/5)")
    args = parser.parse_args(argv)
    cases = args.cases.split(",")
    unknown = [c for c in cases if c not in CASES]
    if unknown or args.repeats < 1:
        parser.error("unknown case(s) %s" % ", ".join(unknown) if unknown else "--repeats must be >= 1")
    for case in tqdm(cases, desc="cases", leave=False):
        print(json.dumps(bench(case, args.repeats)), flush=True)


if __name__ == "__main__":
    main()
