"""The integral optimum of a gradient plan over its options, by MILP (scipy's milp, HiGHS),
within a time budget: GRID's and InArt's "which option per stream, which path per
aggregate" solved exactly where that is cheap, and bounded where it is not.

Streams k (a worker's gradient, or an InArt fragment) each take one option o (binary
x[k,o]); each aggregate g in use takes one path q (binary z[g,q]); every stream sends
at weight_k * f and an aggregate at its members' weight. f = 1/u for

    minimize u
    sum_o x[k,o] = 1                                   every stream
    x[k,o] <= sum_q z[g,q] <= 1                        o joins aggregate g
    sum of the weights on resource r + R_r <= cap_r * u every link and aggregator

(R_r: the return trees' fixed weight on a link, if any), which is linear where
maximizing f directly is not (f times a count). The MILP's dual bound on u is an upper
bound on f, so a plan found in time comes with its gap.
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
                     time_limit_s=DEFAULT_TIME_S, fixed_load=None):
    """The best assignment the MILP finds within time_limit_s, or None if it found none.
    options: {stream: [Option]}; aggregate_paths: {aggregate: [paths]}; weight:
    {stream: weight}; aggregate_of(stream, option) -> aggregate or None;
    capacity_of(resource) -> Mbit/s (a directed link, or an aggregator node);
    fixed_load: {resource: R_r}, weight that no choice moves (the return trees)."""
    fixed_load = fixed_load or {}
    model = _Model(options, aggregate_paths, weight, aggregate_of, capacity_of, fixed_load)
    result = model.solve(time_limit_s)
    if result.x is None or not result.x[0] > 0:
        return None
    x, index = result.x, model.index
    choice = {key: next(o for o in choices if x[index["x", key, o]] > 0.5)
              for key, choices in options.items()}
    used = {aggregate_of(key, option) for key, option in choice.items()} - {None}
    paths = {g: next(q for q in aggregate_paths[g] if x[index["z", g, q]] > 0.5)
             for g in sorted(used, key=str)}
    optimal = result.status == 0
    f = assignment_rate(choice, paths, weight, aggregate_of, capacity_of, fixed_load)
    dual = getattr(result, "mip_dual_bound", None)
    if optimal:
        bound = f
    else:   # HiGHS's bound on u, when it has one, bounds f from above
        bound = 1.0 / dual if dual is not None and dual > 0 else None
    return ExactAssignment(choice, paths, f, bound, optimal)


class _Model:
    """The MILP's columns (u, then x[k,o], then z[g,q]) and rows, as the module doc
    states them."""

    def __init__(self, options, aggregate_paths, weight, aggregate_of, capacity_of, fixed_load):
        self.options, self.aggregate_paths = options, aggregate_paths
        self.fixed_load = fixed_load
        self.weight, self.aggregate_of = weight, aggregate_of
        self.aggregate_weight = {}
        for key, choices in options.items():
            for option in choices:
                aggregate = aggregate_of(key, option)
                if aggregate is not None:
                    self.aggregate_weight[aggregate] = max(
                        self.aggregate_weight.get(aggregate, 0.0), weight[key])
        self.columns = [("u",)] + [("x", key, o) for key, choices in options.items()
                                   for o in choices]
        self.columns += [("z", g, q) for g in sorted(self.aggregate_weight, key=str)
                         for q in aggregate_paths[g]]
        self.index = {column: i for i, column in enumerate(self.columns)}
        self.resources = {}   # resource -> [(column, load)]
        for column in self.columns[1:]:
            touched, load = self._uses(column)
            for resource in touched:
                self.resources.setdefault(resource, []).append((self.index[column], load))
        for resource in fixed_load:
            self.resources.setdefault(resource, [])
        self.capacities = {r: capacity_of(r) for r in self.resources}
        self.rows, self.cols, self.values, self.lower, self.upper = [], [], [], [], []

    def _uses(self, column):
        """The resources a column loads, with its weight."""
        if column[0] == "x":
            key, option = column[1], column[2]
            touched = list(edges_of(option.path))
            if self.aggregate_of(key, option) is not None:
                touched.append(option.node)
            return touched, self.weight[key]
        return list(edges_of(column[2])), self.aggregate_weight[column[1]]

    def _row(self, terms, low, high):
        number = len(self.lower)
        for column, value in terms:
            self.rows.append(number)
            self.cols.append(column)
            self.values.append(value)
        self.lower.append(low)
        self.upper.append(high)

    def _constrain(self, largest):
        index = self.index
        for key, choices in self.options.items():
            self._row([(index["x", key, o], 1.0) for o in choices], 1.0, 1.0)
            for option in choices:
                aggregate = self.aggregate_of(key, option)
                if aggregate is not None:
                    self._row([(index["x", key, option], 1.0)]
                              + [(index["z", aggregate, q], -1.0)
                                 for q in self.aggregate_paths[aggregate]], -np.inf, 0.0)
        for aggregate in self.aggregate_weight:
            self._row([(index["z", aggregate, q], 1.0) for q in self.aggregate_paths[aggregate]],
                      -np.inf, 1.0)
        for resource, terms in self.resources.items():   # scaled: u is a utilization
            capacity = self.capacities[resource]
            if capacity >= NEGLIGIBLE_CAPACITY * largest:
                self._row([(column, load / capacity) for column, load in terms] + [(0, -1.0)],
                          -np.inf, -self.fixed_load.get(resource, 0.0) / capacity)

    def solve(self, time_limit_s):
        """scipy's OptimizeResult for minimize u."""
        count = len(self.columns)
        largest = max(self.capacities.values())
        upper = np.ones(count)
        upper[0] = np.inf
        for resource, terms in self.resources.items():
            if self.capacities[resource] < NEGLIGIBLE_CAPACITY * largest:
                for column, _load in terms:
                    upper[column] = 0.0   # nothing may use a resource that is all taken
        self._constrain(largest)
        matrix = coo_matrix((self.values, (self.rows, self.cols)),
                            shape=(len(self.lower), count)).tocsr()
        costs = np.zeros(count)
        costs[0] = 1.0
        integrality = np.ones(count)
        integrality[0] = 0
        return milp(costs, constraints=LinearConstraint(matrix, self.lower, self.upper),
                    integrality=integrality, bounds=Bounds(np.zeros(count), upper),
                    options={"time_limit": max(0.01, time_limit_s)})


def assignment_rate(choice, paths, weight, aggregate_of, capacity_of, fixed_load=None):
    """f of an integral assignment: the smallest capacity / weight on any resource
    (fixed_load: weight already there, exact_assignment)."""
    load = dict(fixed_load or {})
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
