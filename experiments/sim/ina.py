"""In-network aggregation at the papers' scale: GRID and InArt against their baselines.

    python -m experiments.sim.ina --out results/sim/ina.csv

GRID part (syncfabric/decisions/ina_placement.py): 100 Gbit/s links, aggregator capacity
--aggregator-gbps on the programmable switches, one PS; on GRID's 500-server
leaf-spine (10 spines, 50 leaves) and 192-server fat-tree (k = 8, 6 servers
per edge switch), with the ToRs programmable or a random 20% of all switches;
workers and the PS drawn at random. Policies grid, nearest (ATP-like),
switchml, no-ina (Geryon-like).
InArt part (syncfabric/decisions/inart_placement.py): InArt's emulated fat-tree (k = 6, 54
servers) at 20 Mbit/s (--hetero: U[10, 30] per switch link), PSs at 20,
every switch aggregating 9 Mbit/s; 10-50 workers and 2-4 PSs. Policies inart,
atp (equal split), equal-split, lbmm.
--links paper runs the GRID part under the paper's assumption instead of ours:
links are never a bottleneck (only the PS's ingress T and the aggregation
capacities count), our link accounting switched off. --programmable-ps-tor
also makes the PS's ToR programmable, as the GRID authors' code assumes for ATP.
Each plan's rate (the common sending rate per worker) is also run through the
flow-level simulator (experiments/sim/network.py), which must agree.
comm_time_s is one --gradient-mb gradient per worker at that rate.
"""

import random
import sys
import time
from pathlib import Path

from tqdm import tqdm

from experiments.cli import comma_list, experiment_parser, write_csv
from experiments.plots.ina import plot_sim_ina
from experiments.sim.fabrics import GBIT, fat_tree, servers, spine_leaf
from experiments.sim.network import capacities, plan_flow, simulate
from syncfabric.decisions import ina_placement, ina_problem, inart_placement

GRID_FABRICS = ("leafspine", "fattree")
PROGRAMMABLE = ("tor", "random20")
LINKS = ("counted", "paper")   # our link accounting, or the paper's: only the PS ingress
UNBOUNDED_MBPS = 1e9
COLUMNS = ["part", "fabric", "programmable", "workers", "ps_count", "policy", "rate_mbps",
           "sim_rate_mbps", "comm_time_s", "plan_s", "links", "optimality_gap"]


def parse_args(argv):
    parser = experiment_parser("experiments.sim.ina", __doc__)
    parser.add_argument("--parts", type=comma_list(str, ("grid", "inart")), default=["grid", "inart"])
    parser.add_argument("--grid-workers", type=comma_list(int), default=[20, 40, 60, 80, 100])
    parser.add_argument("--links", type=comma_list(str, LINKS), default=["counted"],
                        help="GRID part: comma list of counted (every link, ours) and paper "
                             "(only the PS's ingress, as the GRID paper assumes)")
    parser.add_argument("--programmable-ps-tor", action="store_true",
                        help="GRID part: the PS's ToR is programmable too (the authors' ATP "
                             "assumes it)")
    parser.add_argument("--aggregator-gbps", type=float, default=1600.0,
                        help="GRID: a programmable switch's aggregation capacity")
    parser.add_argument("--inart-workers", type=comma_list(int), default=[10, 20, 30, 40, 50])
    parser.add_argument("--inart-ps", type=comma_list(int), default=[2, 4])
    parser.add_argument("--hetero", action="store_true",
                        help="InArt: switch links U[10, 30] Mbit/s instead of 20")
    parser.add_argument("--gradient-mb", type=float, default=100.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/sim/ina.csv"))
    args = parser.parse_args(argv)
    if min(args.grid_workers + args.inart_workers + args.inart_ps) < 1:
        parser.error("worker and PS counts must be positive")
    if max(args.inart_workers) + max(args.inart_ps) > 54:
        parser.error("InArt's fat-tree has 54 servers: workers + PSs must fit")
    if args.gradient_mb <= 0 or args.aggregator_gbps <= 0:
        parser.error("--gradient-mb and --aggregator-gbps must be positive")
    return args


def grid_fabric(name, programmable, capacity_mbps, rng, also=()):
    """GRID's fabric with aggregator hosts on the programmable switches (and on `also`)."""
    build = ((lambda **o: spine_leaf("10x50", 10, 100 * GBIT, **o)) if name == "leafspine"
             else (lambda **o: fat_tree(8, 6, 100 * GBIT, **o)))
    if programmable == "tor":   # every ToR, the PS's included
        return build(aggregators="leaves" if name == "leafspine" else "edges",
                     aggregator_bw=capacity_mbps)
    switches = sorted(build().switches)
    chosen = rng.sample(switches, round(0.2 * len(switches)))
    return build(aggregators=sorted(set(chosen) | set(also)), aggregator_bw=capacity_mbps)


def paper_links(view, ps):
    """The fabric as the GRID paper models it: every link unbounded but the PS's ingress."""
    graph = view.graph.copy()
    for _tail, head, data in graph.edges(data=True):
        if head != ps:
            data["capacity_mbps"] = UNBOUNDED_MBPS
    return graph


def simulated_rate(view, graph, plan, size_mbit):
    """The rate the flow-level simulator gives the plan: size over its completion."""
    return size_mbit / simulate([plan_flow("job", plan, size_mbit)],
                                capacities(view, graph)).makespan_s


def row(part, case, policy, plan, view, graph, size_mbit, seconds, links="counted"):
    fabric, programmable, workers, pss = case
    return {"part": part, "fabric": fabric, "programmable": programmable, "workers": workers,
            "ps_count": pss, "policy": policy, "rate_mbps": round(plan.f, 3),
            "sim_rate_mbps": round(simulated_rate(view, graph, plan, size_mbit), 3),
            "comm_time_s": round(size_mbit / plan.f, 4), "plan_s": round(seconds, 3),
            "links": links, "optimality_gap": round(plan.optimality_gap, 4)}


def grid_rows(args):
    cases = [(f, p, n, links) for links in args.links for f in GRID_FABRICS for p in PROGRAMMABLE
             for n in args.grid_workers]
    size = args.gradient_mb * 8
    rows = []
    for fabric, programmable, workers, links in tqdm(cases, desc="GRID", unit="case",
                                                     file=sys.stderr):
        rng = random.Random(args.seed)
        view = grid_fabric(fabric, programmable, args.aggregator_gbps * GBIT, rng)
        hosts = servers(view)
        rng.shuffle(hosts)
        if args.programmable_ps_tor:   # the same draw, and the PS's ToR
            ps_tor = next(iter(view.graph.successors(hosts[workers])))
            view = grid_fabric(fabric, programmable, args.aggregator_gbps * GBIT,
                               random.Random(args.seed), also=[ps_tor])
        graph = view.graph if links == "counted" else paper_links(view, hosts[workers])
        problem = ina_problem.InaProblem(graph, hosts[:workers], hosts[workers],
                                           view.aggregators)
        for policy in ina_problem.POLICIES:
            started = time.perf_counter()
            plan = ina_placement.plan(problem, policy)
            rows.append(row("grid", (fabric, programmable, workers, 1), policy, plan, view, graph,
                            size, time.perf_counter() - started, links))
    return rows


def inart_rows(args):
    cases = [(n, p) for p in args.inart_ps for n in args.inart_workers]
    size = args.gradient_mb * 8
    rows = []
    for workers, pss in tqdm(cases, desc="InArt", unit="case", file=sys.stderr):
        rng = random.Random(args.seed)
        bw = [round(rng.uniform(10, 30), 2) for _ in range(6 ** 3 // 2)] if args.hetero else 20.0
        view = fat_tree(6, 3, bw, host_bw=20.0, aggregators="all", aggregator_bw=9)
        hosts = servers(view)
        rng.shuffle(hosts)
        problem = inart_placement.InartProblem(view.graph, hosts[pss:pss + workers], hosts[:pss],
                                               view.aggregators)
        for policy in inart_placement.POLICIES:
            started = time.perf_counter()
            plan = inart_placement.plan(problem, policy)
            rows.append(row("inart", ("fattree-k6", "all", workers, pss), policy, plan, view,
                            view.graph, size, time.perf_counter() - started))
    return rows


def main(argv=None):
    args = parse_args(argv)
    rows = (grid_rows(args) if "grid" in args.parts else []) + (
        inart_rows(args) if "inart" in args.parts else [])
    write_csv(rows, args.out, COLUMNS)
    by = {(r["part"], r["fabric"], r["programmable"], r["workers"], r["ps_count"], r["links"],
           r["policy"]): r for r in rows}
    for (part, fabric, programmable, workers, pss, links, policy), r in by.items():
        if part == "grid" and policy == ina_problem.GRID and workers == max(args.grid_workers):
            others = {p: by[part, fabric, programmable, workers, pss, links, p]["rate_mbps"] / GBIT
                      for p in ina_problem.POLICIES}
            print("GRID %s %s, %d workers, links %s: %s Gbit/s (GRID's gap %.3f)" % (
                fabric, programmable, workers, links,
                ", ".join("%s %.2f" % (p, rate) for p, rate in others.items()),
                r["optimality_gap"]))
        if part == "inart" and policy == inart_placement.INART:
            atp = by[part, fabric, programmable, workers, pss, links, inart_placement.ATP]
            print("InArt %d workers, %d PSs: rate %.2f vs ATP %.2f Mbit/s, comm time %+.0f%%"
                  % (workers, pss, r["rate_mbps"], atp["rate_mbps"],
                     100 * (r["comm_time_s"] / atp["comm_time_s"] - 1)))
    print("CSV: %s  figure: %s" % (args.out, plot_sim_ina(args.out)))


if __name__ == "__main__":
    main()
