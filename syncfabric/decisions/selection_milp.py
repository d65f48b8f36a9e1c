"""SELMCAST's exact answer for small rounds: the lexicographic optimum (minimize the
round time t, then maximize the number of receivers at that t) as a MILP solved by
scipy's HiGHS. The heuristics in receiver_selection are measured against it."""

import numpy as np

from syncfabric.decisions.selection_round import (L7, MILP, SelectionError, check_cost_model,
                                                  forced_pairs, selection_of)


def milp_select(round_input, cost_model, time_limit_s=60.0):
    """The exact lexicographic optimum: minimize t, then the most receivers at that t."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import lil_matrix

    check_cost_model(cost_model)
    n, v = round_input.n, round_input.sizes
    pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
    column = {pair: index for index, pair in enumerate(pairs)}
    t_column = len(pairs)
    rows, lower, upper = [], [], []

    def constraint(coefficients, low, high):
        rows.append(coefficients)
        lower.append(low)
        upper.append(high)

    for i in range(n):   # at least p_i receivers
        constraint({column[i, j]: 1.0 for j in range(n) if j != i}, round_input.min_receivers[i], np.inf)
    for i, j in forced_pairs(round_input):   # one of the pair sends to the other
        constraint({column[i, j]: 1.0, column[j, i]: 1.0}, 1.0, np.inf)
    for j in range(n):   # egress: sum_i v_i x_ij <= b'_j t
        coefficients = {column[i, j]: v[i] for i in range(n) if i != j}
        coefficients[t_column] = -round_input.egress[j]
        constraint(coefficients, -np.inf, 0.0)
    for i in range(n):   # ingress: L3 v_i x_ij <= b_i t for each j, L7 the sum
        if cost_model == L7:
            coefficients = {column[i, j]: v[i] for j in range(n) if j != i}
            coefficients[t_column] = -round_input.ingress[i]
            constraint(coefficients, -np.inf, 0.0)
        else:
            for j in range(n):
                if j != i:
                    constraint({column[i, j]: v[i], t_column: -round_input.ingress[i]}, -np.inf, 0.0)
    matrix = lil_matrix((len(rows), t_column + 1))
    for row, coefficients in enumerate(rows):
        for col, value in coefficients.items():
            matrix[row, col] = value
    integrality = np.array([1] * len(pairs) + [0])
    options = {"time_limit": time_limit_s}
    constraints = [LinearConstraint(matrix.tocsr(), lower, upper)]

    minimize_t = np.zeros(t_column + 1)
    minimize_t[t_column] = 1.0
    first = milp(minimize_t, constraints=constraints, integrality=integrality,
                 bounds=Bounds(0.0, np.r_[np.ones(len(pairs)), np.inf]), options=options)
    if not first.success:
        raise SelectionError("the MILP found no optimum: %s" % first.message)
    t_star = first.x[t_column]
    most_receivers = np.r_[-np.ones(len(pairs)), 0.0]
    second = milp(most_receivers, constraints=constraints, integrality=integrality,
                  bounds=Bounds(0.0, np.r_[np.ones(len(pairs)), t_star * (1 + 1e-7) + 1e-12]),
                  options=options)
    solution = second.x if second.success else first.x
    x = np.zeros((n, n), bool)
    for (i, j), value in zip(pairs, solution[:t_column]):
        x[i, j] = value > 0.5
    return selection_of(round_input, x, MILP, cost_model)
