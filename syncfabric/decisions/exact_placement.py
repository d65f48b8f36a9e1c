"""The integral optimum of a gradient plan over its options, by MILP (scipy's milp, HiGHS),
within a time budget: GRID's and InArt's "which option per stream, which path per
aggregate" solved exactly where that is cheap, and bounded where it is not.

Streams k (a worker's gradient, or an InArt fragment) each take one option o (binary
x[k,o]); each aggregate g in use takes one path q (binary z[g,q]); every stream sends
at weight_k * f and an aggregate at its members' weight. f = 1/u for

    minimize u
    sum_o x[k,o] = 1                                   every stream
    x[k,o] <= sum_q z[g,q] <= 1                        o joins aggregate g
    sum of the weights on resource r <= cap_r * u      every link and aggregator

which is linear where maximizing f directly is not (f times a count). The MILP's dual
bound on u is an upper bound on f, so a plan found in time comes with its gap.
"""

from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_matrix

from syncfabric.decisions.gradient_plan import edges_of

DEFAULT_TIME_S = 1.0
NEGLIGIBLE_CAPACITY = 1e-6   # of the largest: a resource with less takes no stream


@dataclass
class ExactAssignment:
    choice: dict       # stream -> Option
    paths: dict        # aggregate in use -> path
    f: float           # the assignment's rate
    f_bound: object    # no assignment over these options does better (None: unknown)
    optimal: bool      # the MILP finished: f is the integral optimum


def exact_assignment(options, aggregate_paths, weight, aggregate_of, capacity_of,
                     time_limit_s=DEFAULT_TIME_S):
    """The best assignment the MILP finds within time_limit_s, or None if it found none.
    options: {stream: [Option]}; aggregate_paths: {aggregate: [paths]}; weight:
    {stream: weight}; aggregate_of(stream, option) -> aggregate or None;
    capacity_of(resource) -> Mbit/s (a directed link, or an aggregator node)."""
    resources = {}
    columns = [("u",)]
    for key, choices in options.items():
        for option in choices:
            columns.append(("x", key, option))
    aggregate_weight = {}
    for key, choices in options.items():
        for option in choices:
            aggregate = aggregate_of(key, option)
            if aggregate is not None:
                aggregate_weight[aggregate] = max(aggregate_weight.get(aggregate, 0.0), weight[key])
    for aggregate in sorted(aggregate_weight, key=str):
        for path in aggregate_paths[aggregate]:
            columns.append(("z", aggregate, path))
    index = {column: i for i, column in enumerate(columns)}

    def uses(column):
        """The resources a column loads, with its weight."""
        if column[0] == "x":
            key, option = column[1], column[2]
            touched = list(edges_of(option.path))
            if aggregate_of(key, option) is not None:
                touched.append(option.node)
            return touched, weight[key]
        return list(edges_of(column[2])), aggregate_weight[column[1]]

    for column in columns[1:]:
        touched, load = uses(column)
        for resource in touched:
            resources.setdefault(resource, []).append((index[column], load))
    capacities = {r: capacity_of(r) for r in resources}
    largest = max(capacities.values())
    upper = np.ones(len(columns))
    upper[0] = np.inf
    for resource, terms in resources.items():
        if capacities[resource] < NEGLIGIBLE_CAPACITY * largest:
            for column, _load in terms:
                upper[column] = 0.0   # nothing may use a resource that is all taken
    rows, cols, values, lower_bounds, upper_bounds = [], [], [], [], []

    def row(terms, low, high):
        number = len(lower_bounds)
        for column, value in terms:
            rows.append(number)
            cols.append(column)
            values.append(value)
        lower_bounds.append(low)
        upper_bounds.append(high)

    for key, choices in options.items():
        row([(index["x", key, o], 1.0) for o in choices], 1.0, 1.0)
        for option in choices:
            aggregate = aggregate_of(key, option)
            if aggregate is not None:
                row([(index["x", key, option], 1.0)]
                    + [(index["z", aggregate, q], -1.0) for q in aggregate_paths[aggregate]],
                    -np.inf, 0.0)
    for aggregate in aggregate_weight:
        row([(index["z", aggregate, q], 1.0) for q in aggregate_paths[aggregate]], -np.inf, 1.0)
    for resource, terms in resources.items():   # scaled by the capacity: u is a utilization
        capacity = capacities[resource]
        if capacity >= NEGLIGIBLE_CAPACITY * largest:
            row([(column, load / capacity) for column, load in terms] + [(0, -1.0)], -np.inf, 0.0)
    matrix = coo_matrix((values, (rows, cols)), shape=(len(lower_bounds), len(columns))).tocsr()
    costs = np.zeros(len(columns))
    costs[0] = 1.0
    integrality = np.ones(len(columns))
    integrality[0] = 0
    result = milp(costs, constraints=LinearConstraint(matrix, lower_bounds, upper_bounds),
                  integrality=integrality, bounds=Bounds(np.zeros(len(columns)), upper),
                  options={"time_limit": max(0.01, time_limit_s)})
    if result.x is None or not result.x[0] > 0:
        return None
    x = result.x
    choice = {key: next(o for o in choices if x[index["x", key, o]] > 0.5)
              for key, choices in options.items()}
    used = {aggregate_of(key, option) for key, option in choice.items()} - {None}
    paths = {g: next(q for q in aggregate_paths[g] if x[index["z", g, q]] > 0.5)
             for g in sorted(used, key=str)}
    optimal = result.status == 0
    f = assignment_rate(choice, paths, weight, aggregate_of, capacity_of)
    dual = getattr(result, "mip_dual_bound", None)
    if optimal:
        bound = f
    else:   # HiGHS's bound on u, when it has one, bounds f from above
        bound = 1.0 / dual if dual is not None and dual > 0 else None
    return ExactAssignment(choice, paths, f, bound, optimal)


def assignment_rate(choice, paths, weight, aggregate_of, capacity_of):
    """f of an integral assignment: the smallest capacity / weight on any resource."""
    load = {}
    aggregates = {}
    for key, option in choice.items():
        touched = list(edges_of(option.path))
        aggregate = aggregate_of(key, option)
        if aggregate is not None:
            touched.append(option.node)
            aggregates[aggregate] = max(aggregates.get(aggregate, 0.0), weight[key])
        for resource in touched:
            load[resource] = load.get(resource, 0.0) + weight[key]
    for aggregate, rate in aggregates.items():
        for edge in edges_of(paths[aggregate]):
            load[edge] = load.get(edge, 0.0) + rate
    return min(capacity_of(r) / w for r, w in load.items() if w > 0)
