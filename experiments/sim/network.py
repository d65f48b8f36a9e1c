"""Flow-level simulation of a fabric: flows share links (and aggregators, PS ports)
max-min fairly; event-driven, the rates are recomputed whenever a flow starts or ends.

A Flow is what the controller's decisions put on the network, built by the
helpers below from the same objects the controller uses: a unicast path
(syncfabric/decisions/unicast_routes.py), a multicast tree (syncfabric/decisions/multicast_trees.py, one flow
over all its edges, capped by its reservation), or an INA plan
(syncfabric/decisions/gradient_plan.py, GRID's and InArt's alike: one flow for the whole job,
since every stream of a round runs at the plan's common rate, putting on each
link and aggregator plan.loads() per unit of that rate). Resources are the
view's directed edges (host links included: a PS's link is its ingress) and
aggregator hosts (their processing capacity).

Sizes are in Mbit, rates in Mbit/s, times in seconds.
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from experiments.sim.fair_share import max_min_rates

OVERLOAD_TOLERANCE = 1e-6   # relative


class SimulationError(RuntimeError):
    """A flow can never finish, or a resource was loaded over its capacity."""


@dataclass
class Flow:
    name: str
    usage: dict                 # resource -> Mbit/s on it per Mbit/s of the flow
    size_mbit: float
    start_s: float = 0.0
    cap_mbps: float = math.inf  # e.g. a tree's reservation, enforced by its meter


@dataclass
class Result:
    finish_s: dict              # flow name -> when it ended
    events: int                 # rate computations
    max_utilization: float      # the highest load / capacity of any resource at any event
    peak_load: dict             # resource -> the highest load it carried (Mbit/s)

    @property
    def makespan_s(self):
        return max(self.finish_s.values(), default=0.0)


def capacities(view, graph=None):
    """{resource: capacity} of a FabricView: its directed edges (those of `graph`, if
    given: the view's links with other capacities) and aggregators."""
    graph = view.graph if graph is None else graph
    result = {edge: graph.edges[edge]["capacity_mbps"] for edge in graph.edges}
    result.update(view.aggregators)
    return result


def simulate(flows, capacity):
    """Run `flows` to completion over resources of `capacity` ({resource: Mbit/s})."""
    names = [flow.name for flow in flows]
    if len(set(names)) != len(names):
        raise ValueError("flow names must be unique")
    used = sorted({r for flow in flows for r in flow.usage}, key=repr)
    unknown = [r for r in used if r not in capacity]
    if unknown:
        raise ValueError("unknown resource(s): %s" % unknown[:5])
    row = {resource: i for i, resource in enumerate(used)}
    capped = [i for i, flow in enumerate(flows) if math.isfinite(flow.cap_mbps)]
    rows, columns, weights = [], [], []
    for column, flow in enumerate(flows):
        for resource, weight in flow.usage.items():
            rows.append(row[resource])
            columns.append(column)
            weights.append(weight)
    for extra, column in enumerate(capped, start=len(used)):   # a cap is a resource of its own
        rows.append(extra)
        columns.append(column)
        weights.append(1.0)
    usage = sparse.csc_matrix((weights, (rows, columns)), shape=(len(used) + len(capped), len(flows)))
    limit = np.array([capacity[r] for r in used] + [flows[i].cap_mbps for i in capped], dtype=float)
    starts = np.array([flow.start_s for flow in flows], dtype=float)
    sizes = np.array([flow.size_mbit for flow in flows], dtype=float)
    remaining = sizes.copy()
    finish = np.full(len(flows), np.nan)
    peak = np.zeros(len(used))
    now, events, worst = 0.0, 0, 0.0
    while np.isnan(finish).any():
        running = np.flatnonzero(np.isnan(finish) & (starts <= now))
        waiting = starts[np.isnan(finish) & (starts > now)]
        next_start = waiting.min() if waiting.size else math.inf
        if not running.size:
            now = next_start
            continue
        rates = max_min_rates(usage[:, running], limit)
        events += 1
        load = usage[:, running] @ rates
        with np.errstate(divide="ignore", invalid="ignore"):   # a resource of capacity 0
            over = np.where(load[:len(used)] > 0, load[:len(used)] / limit[:len(used)], 0.0)
        worst = max(worst, over.max(initial=0.0))
        if worst > 1 + OVERLOAD_TOLERANCE:
            raise SimulationError("resource %r loaded %.6f of its capacity"
                                  % (used[int(over.argmax())], over.max()))
        peak = np.maximum(peak, load[:len(used)])
        moving = rates > 0
        until_done = np.full(running.size, math.inf)
        until_done[moving] = remaining[running][moving] / rates[moving]
        step = min(until_done.min(initial=math.inf), next_start - now)
        if not math.isfinite(step):
            raise SimulationError("flow(s) %s can never finish (rate 0)"
                                  % [names[i] for i in running[~moving]][:5])
        now += step
        remaining[running] -= rates * step
        done = running[remaining[running] <= 1e-9 * np.maximum(sizes[running], 1.0)]
        finish[done] = now
    return Result(dict(zip(names, finish.tolist())), events, worst,
                  {r: float(p) for r, p in zip(used, peak)})


# --- flows from the controller's decisions ---------------------------------------

def path_flow(name, view, source, switches, destination, size_mbit, start_s=0.0,
              cap_mbps=math.inf):
    """A unicast flow: source host, the switches of its route, destination host."""
    nodes = [source, *switches, destination]
    return Flow(name, {edge: 1.0 for edge in zip(nodes, nodes[1:])}, size_mbit, start_s, cap_mbps)


def tree_flow(name, tree, size_mbit, start_s=0.0, reserved_mbps=None):
    """A multicast tree (MulticastTree) as one flow, capped by its reservation."""
    return Flow(name, {tuple(edge): 1.0 for edge in tree.edges}, size_mbit, start_s,
                math.inf if reserved_mbps is None else reserved_mbps)


def plan_flow(name, plan, size_mbit, start_s=0.0, cap_mbps=math.inf):
    """A GradientPlan (GRID's or InArt's) as one flow at the plan's rate f per worker:
    every link and aggregator carries plan.loads() / f per unit. size_mbit is one worker's gradient: the flow ends when every worker sent it.
    cap_mbps: the workers' pacing, if they send slower than f."""
    if not plan.f > 0:
        raise ValueError("plan %s has rate %r" % (name, plan.f))
    return Flow(name, {resource: load / plan.f for resource, load in plan.loads().items()
                       if load > 0}, size_mbit, start_s, cap_mbps)
