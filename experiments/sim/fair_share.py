"""Max-min fair rates by progressive filling: every unfrozen flow's rate grows
equally until some resource it uses is full; flows through full resources freeze.

A flow uses resources (links, ports, an aggregator's capacity) with a weight:
the rate it puts on the resource per unit of its own rate. A unicast or a
multicast flow puts 1 on each link it crosses (so a multicast goes at its
slowest part); an aggregation job puts on an aggregator the sum of its input
streams. A flow's own rate cap (a reservation's meter) is one more resource
only it uses.
"""

import numpy as np
from scipy import sparse


def max_min_rates(usage, capacity):
    """Rates of the flows (columns of `usage`, a resources x flows array, dense or
    scipy.sparse, bool or weights >= 0) under the resources' capacities (same units
    as the rates). A flow that uses nothing gets rate 0."""
    # small problems go faster dense, large sparse: the same operations serve both
    usage = (sparse.csr_matrix(usage, dtype=float) if sparse.issparse(usage)
             else np.asarray(usage, dtype=float))
    capacity = np.asarray(capacity, dtype=float)
    rates = np.zeros(usage.shape[1])
    active = np.asarray((usage != 0).sum(axis=0)).ravel() > 0
    left = capacity.copy()
    while active.any():
        users = usage @ active.astype(float)       # load per resource per unit of rate
        busy = users > 0
        step = np.min(left[busy] / users[busy])
        rates[active] += step
        left -= step * users
        full = busy & (left <= 1e-12 * np.maximum(capacity, 1.0))
        active &= ~(usage.T @ full.astype(float) > 0)
    return rates
