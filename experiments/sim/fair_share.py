"""Max-min fair rates by progressive filling: every unfrozen flow's rate grows
equally until some resource it uses is full; flows through full resources freeze.

A flow uses a set of resources (links, ports, an aggregator's capacity); a
multicast flow uses all of them at one rate, so it goes at its slowest part.
"""

import numpy as np


def max_min_rates(usage, capacity):
    """Rates of the flows (columns of `usage`, a bool resources x flows array)
    under the resources' capacities (same units as the rates)."""
    usage = np.asarray(usage, dtype=bool)
    capacity = np.asarray(capacity, dtype=float)
    rates = np.zeros(usage.shape[1])
    active = usage.any(axis=0)
    left = capacity.copy()
    while active.any():
        users = usage[:, active].sum(axis=1)
        busy = users > 0
        step = np.min(left[busy] / users[busy])
        rates[active] += step
        left -= step * users
        full = busy & (left <= 1e-12 * np.maximum(capacity, 1.0))
        active &= ~usage[full].any(axis=0)
    return rates
