"""Linear programs written row by row over named variables and solved by scipy's HiGHS:
the placement models (syncfabric/decisions/ina_placement.py, syncfabric/decisions/inart_placement.py) are stated
with it, so neither deals with column indices or sparse matrices."""

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix


class LpError(ValueError):
    """HiGHS found no optimum (infeasible, unbounded, or failed)."""


class SparseLp:
    """Variables are any hashable keys, each >= 0 (or a given lower bound); rows are
    `sum coef * variable <= bound`."""

    def __init__(self):
        self._index = {}
        self._rows, self._columns, self._values, self._bounds = [], [], [], []

    def variable(self, key):
        """The column of `key`, created on first use (creation order is column order)."""
        return self._index.setdefault(key, len(self._index))

    def at_most(self, terms, bound):
        """Add the row sum(coef * key for key, coef in terms) <= bound."""
        row = len(self._bounds)
        for key, coef in terms:
            self._rows.append(row)
            self._columns.append(self.variable(key))
            self._values.append(coef)
        self._bounds.append(bound)

    def maximize(self, objective, lower=None):
        """{key: value} at an optimum of sum(coef * key) over objective {key: coef};
        lower: {key: lower bound} for variables that must exceed 0."""
        count = len(self._index)
        matrix = coo_matrix((self._values, (self._rows, self._columns)),
                            shape=(len(self._bounds), count)).tocsr()
        costs = np.zeros(count)
        for key, coef in objective.items():
            costs[self._index[key]] = -coef
        bounds = [(0, None)] * count
        for key, value in (lower or {}).items():
            bounds[self._index[key]] = (value, None)
        result = linprog(costs, A_ub=matrix, b_ub=np.array(self._bounds, dtype=float),
                         bounds=bounds, method="highs")
        if result.status != 0:
            raise LpError(result.message)
        return {key: float(result.x[column]) for key, column in self._index.items()}
