"""How far GRID's and InArt's plans are from the best integral plan over their options.

    python -m experiments.ina_optimality [--instances 200] [--out results/ina_optimality.csv]

Random small fabrics (spine-leaf, fat-tree-like and random switch graphs; capacities
U[5, 30]; 1-3 aggregators; GRID 3-8 workers, InArt 3-4 workers and 2 PSs) against a
brute force: a depth-first search over every option per stream and every path per
aggregate, pruned by the rate so far (a stream added never raises it). Then the paper
scale: 100 workers on a 64x64 spine-leaf with 20% of the switches programmable,
planning time and the gap the plan reports. Writes a CSV and a PNG of the ratios.
"""

import random
import statistics
import sys
import time

import networkx as nx
from tqdm import tqdm

from experiments.cli import csv_out_argument, experiment_parser, write_csv
from experiments.plots.ina import plot_ina_optimality
from experiments.sim.fabrics import paper_scale_fabric
from syncfabric.decisions import ina_placement, inart_placement
from syncfabric.decisions.gradient_plan import aggregate_of, edges_of
from syncfabric.decisions.ina_problem import GRID, InaProblem, capacity_of
from syncfabric.decisions.inart_placement import INART, InartProblem

KINDS = ("spine-leaf", "fat-tree", "random")
COLUMNS = ["instance", "kind", "planner", "workers", "pss", "aggregators", "f", "f_repaired",
           "optimum", "ratio", "repaired_ratio", "optimality_gap", "plan_s", "oracle_s"]
CAPACITY = (5, 30)


def switch_graph(rng, kind):
    """A small switch fabric with U[5, 30] capacity per cable (both directions)."""
    if kind == "spine-leaf":
        spines = ["s%d" % i for i in range(rng.randint(1, 3))]
        leaves = ["l%d" % i for i in range(rng.randint(2, 4))]
        cables = [(s, l) for s in spines for l in leaves]
    elif kind == "fat-tree":   # two pods of two edge and two aggregation switches, two cores
        cables = [("c%d" % c, "a%d%d" % (p, c)) for p in range(2) for c in range(2)]
        cables += [("a%d%d" % (p, a), "e%d%d" % (p, e)) for p in range(2) for a in range(2)
                   for e in range(2)]
    else:
        count = rng.randint(4, 6)
        graph = nx.gnm_random_graph(count, rng.randint(count - 1, count + 2),
                                    seed=rng.randrange(2 ** 31))
        while not nx.is_connected(graph):
            a, b = rng.sample(range(count), 2)
            graph.add_edge(a, b)
        cables = [("r%d" % a, "r%d" % b) for a, b in graph.edges]
    graph = nx.DiGraph()
    for a, b in cables:
        capacity = rng.uniform(*CAPACITY)
        graph.add_edge(a, b, capacity_mbps=capacity)
        graph.add_edge(b, a, capacity_mbps=capacity)
    return graph


def attach(rng, graph, host, capacity=None):
    switch = rng.choice(sorted(n for n in graph if not n.startswith(("w", "ps", "agg"))))
    capacity = capacity or rng.uniform(*CAPACITY)
    graph.add_edge(host, switch, capacity_mbps=capacity)
    graph.add_edge(switch, host, capacity_mbps=capacity)


def random_instance(rng, kind, workers, pss):
    """(graph, workers, PSs, {aggregator: C_a}) on a fresh small fabric."""
    graph = switch_graph(rng, kind)
    aggregators = {"agg%d" % i: rng.uniform(*CAPACITY) for i in range(rng.randint(1, 3))}
    names = ["w%d" % i for i in range(workers)]
    ps_names = ["ps%d" % i for i in range(pss)]
    for host in names + ps_names + list(aggregators):
        attach(rng, graph, host)
    return graph, names, ps_names, aggregators


def brute_force(options, aggregate_paths, weight, capacity, start=0.0):
    """The best rate f over every integral assignment (one option per stream, one path per
    aggregate in use): depth-first, pruned by the rate so far. start: a rate known to be
    reachable (a plan's), so branches that cannot beat it are cut."""
    streams = sorted(options, key=str)
    load, members = {}, {}
    best = [start]
    # what every option of a stream loads (its source's own link) is loaded up front: the
    # rate so far then bounds every completion much more tightly
    common = {}
    for key in streams:
        shared = set.intersection(*(set(edges_of(o.path)) for o in options[key]))
        common[key] = shared
        for edge in shared:
            load[edge] = load.get(edge, 0.0) + weight[key]

    def rate():
        return min((capacity(r) / w for r, w in load.items() if w > 1e-12), default=float("inf"))

    def add(resources, w, sign):
        for resource in resources:
            load[resource] = load.get(resource, 0.0) + sign * w

    def visit(depth):
        if rate() <= best[0] * (1 + 1e-12):
            return
        if depth == len(streams):
            best[0] = rate()
            return
        key = streams[depth]
        for option in options[key]:
            aggregate = aggregate_of(key, option)
            own = [e for e in edges_of(option.path) if e not in common[key]]
            own += [option.node] if aggregate else []
            add(own, weight[key], +1)
            if aggregate is None or members.get(aggregate):
                members[aggregate] = members.get(aggregate, 0) + 1
                visit(depth + 1)
                members[aggregate] -= 1
            else:   # the aggregate appears: branch on its path too
                members[aggregate] = 1
                for path in aggregate_paths[aggregate]:
                    add(list(edges_of(path)), weight[key], +1)
                    visit(depth + 1)
                    add(list(edges_of(path)), weight[key], -1)
                members[aggregate] = 0
            add(own, weight[key], -1)

    visit(0)
    return best[0]


PLANNERS = {GRID: (ina_placement, 1, lambda graph, workers, pss, aggregators: InaProblem(
                graph, workers, pss[0], aggregators)),
            INART: (inart_placement, 2, InartProblem)}


def case(rng, kind, workers, planner):
    """(plan, integral optimum by brute force, planning s, brute force s, aggregators) of
    `planner` on a fresh random instance."""
    module, pss, problem_of = PLANNERS[planner]
    graph, names, ps_names, aggregators = random_instance(rng, kind, workers, pss)
    problem = problem_of(graph, names, ps_names, aggregators)
    started = time.perf_counter()
    result = module.plan(problem, planner)
    plan_s = time.perf_counter() - started
    options, aggregate_paths = module.fragment_options(problem, planner)
    started = time.perf_counter()
    optimum = brute_force(options, aggregate_paths, {k: result.split[k[1]] for k in options},
                          lambda r: capacity_of(problem, r), start=result.f_repaired * (1 - 1e-9))
    return result, optimum, plan_s, time.perf_counter() - started, len(aggregators)


def small_instances(count, seed):
    """Rows of GRID and InArt on `count` random instances each."""
    rng = random.Random(seed)
    rows = []
    for index in tqdm(range(count), desc="instances", unit="instance", file=sys.stderr):
        kind = KINDS[index % len(KINDS)]
        for planner, workers in ((GRID, rng.randint(3, 8)), (INART, rng.randint(3, 4))):
            result, optimum, plan_s, oracle_s, aggregators = case(rng, kind, workers, planner)
            rows.append({"instance": index, "kind": kind, "planner": planner, "workers": workers,
                         "pss": len(result.split), "aggregators": aggregators, "f": result.f,
                         "f_repaired": result.f_repaired, "optimum": optimum,
                         "ratio": result.f / optimum, "repaired_ratio": result.f_repaired / optimum,
                         "optimality_gap": result.optimality_gap, "plan_s": plan_s,
                         "oracle_s": oracle_s})
    return rows


def paper_scale(seed=0):
    """GRID for 100 workers on a 64x64 spine-leaf, 20% of the switches programmable."""
    from syncfabric.decisions.fabric_view import FabricView
    rng = random.Random(seed)
    view = FabricView(paper_scale_fabric(rng))
    hosts = [h for h in view.hosts if not view.is_aggregator(h)]
    rng.shuffle(hosts)
    problem = InaProblem(view.graph, hosts[:100], hosts[100], view.aggregators)
    started = time.perf_counter()
    result = ina_placement.plan(problem, GRID)
    return {"plan_s": time.perf_counter() - started, "f": result.f, "f_lp": result.f_lp,
            "f_bound": result.f_bound, "optimality_gap": result.optimality_gap}


def summary(rows, scale):
    lines = []
    for planner in (GRID, INART):
        mine = [r for r in rows if r["planner"] == planner]
        if not mine:
            continue
        for column, what in (("ratio", "plan"), ("repaired_ratio", "its one-option-per-stream plan")):
            ratios = sorted(r[column] for r in mine)
            lines.append("%s, %d instances, %s / integral optimum: min %.4f, 1st percentile "
                         "%.4f, median %.4f, max %.4f; below 0.99: %d" % (
                             planner, len(ratios), what, ratios[0], ratios[len(ratios) // 100],
                             statistics.median(ratios), ratios[-1],
                             sum(r < 0.99 for r in ratios)))
        lines.append("%s: largest reported gap %.4f; planning median %.3f s, max %.3f s" % (
            planner, max(r["optimality_gap"] for r in mine),
            statistics.median(r["plan_s"] for r in mine), max(r["plan_s"] for r in mine)))
    if scale:
        lines.append("GRID, 100 workers on 64x64 (20%% programmable): planned in %.2f s, "
                     "f %.1f, bound %.1f, gap %.4f" % (scale["plan_s"], scale["f"],
                                                      scale["f_bound"], scale["optimality_gap"]))
    return "\n".join(lines)


def parse_args(argv):
    parser = experiment_parser("experiments.ina_optimality", __doc__)
    parser.add_argument("--instances", type=int, default=200,
                        help="random small instances per planner (at least 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-scale", action="store_true", help="skip the 64x64 case")
    csv_out_argument(parser, "ina_optimality")
    args = parser.parse_args(argv)
    if args.instances < 1:
        parser.error("--instances must be at least 1")
    return args


def main(argv=None):
    args = parse_args(argv)
    rows = small_instances(args.instances, args.seed)
    write_csv(rows, args.out, COLUMNS)
    figure = plot_ina_optimality(args.out)
    print(summary(rows, None if args.no_scale else paper_scale(args.seed)))
    print("CSV: %s  figure: %s" % (args.out, figure))


if __name__ == "__main__":
    main()
