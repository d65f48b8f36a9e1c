"""SSP peer-to-peer sync on one big switch, event by event (SELMCAST's Algorithm 2 online).

Each worker computes iteration after iteration (compute times drawn per
iteration) and never waits for the network, except that no worker starts
iteration r before every worker finished iteration r - staleness. When a
worker finishes an iteration it has a new update: receiver_selection.ssp_on_ready
decides which of its previous transfers continue, who receives the new one,
and its deadline. Transfers share ingress and egress max-min fairly (an L3
multicast is one flow at its slowest receiver's pace; L7 one flow per copy).
The k-rule counts rounds as iterations completed by every worker.

multicast_scale = receivers that got an update completely, per update, / n.
"""

import time
from dataclasses import dataclass, field

import numpy as np

from experiments.sim.fair_share import max_min_rates
from syncfabric.decisions.selection_round import L7, RoundInput
from syncfabric.decisions.ssp_selection import ssp_on_ready
from syncfabric.decisions.sync_history import SyncHistory


@dataclass
class Transfer:
    sender: int
    receivers: set
    remaining: float        # what is left for each of its receivers
    update: int             # index of the update it carries (for the scale)


@dataclass
class SspResult:
    multicast_scale: float
    preempted: int          # receivers whose transfer was cut by a newer update
    deliveries: int
    updates: int
    decisions_ms: list = field(default_factory=list)


def ready_times(compute_s, staleness):
    """ready[i, r]: when worker i finishes iteration r (compute_s is n x iterations)."""
    ready = np.zeros_like(compute_s)
    for r in range(compute_s.shape[1]):
        start = ready[:, r - 1] if r else np.zeros(len(compute_s))
        if r >= staleness:
            start = np.maximum(start, ready[:, r - staleness].max())
        ready[:, r] = start + compute_s[:, r]
    return ready


def advance_transfers(transfers, now, until, capacity, sizes, finished):
    """Move the transfers on at their max-min fair rates (each sender's ingress and each
    receiver's egress in `capacity`) from `now` until `until`, or until none is left;
    a transfer that ends leaves `transfers` through finished(transfer). Returns the
    time reached."""
    n = len(sizes)
    while transfers and now < until:
        rows, columns = [], []
        for column, transfer in enumerate(transfers):
            rows.append(transfer.sender)
            rows.extend(n + j for j in transfer.receivers)
            columns.extend([column] * (len(transfer.receivers) + 1))
        usage = np.zeros((2 * n, len(transfers)))
        usage[rows, columns] = 1.0
        rates = max_min_rates(usage, capacity)
        finish = np.array([t.remaining for t in transfers]) / rates
        step = min(finish.min(), until - now)
        now += step
        for transfer, rate in zip(transfers, rates):
            transfer.remaining -= rate * step
        for transfer in [t for t in transfers if t.remaining <= 1e-9 * sizes[t.sender]]:
            transfers.remove(transfer)
            finished(transfer)
    return max(now, until)


def pending_towards(transfers, sender, n):
    """(remaining, load) per worker: the most of `sender`'s updates still on the way to
    it, and every bit still on the way to it."""
    remaining, load = np.zeros(n), np.zeros(n)
    for transfer in transfers:
        receivers = list(transfer.receivers)
        load[receivers] += transfer.remaining
        if transfer.sender == sender:
            remaining[receivers] = np.maximum(remaining[receivers], transfer.remaining)
    return remaining, load


def simulate_ssp(sizes, ingress, egress, min_receivers, compute_s, policy, cost_model, k=4,
                 staleness=4, eta=0.75, rng=None):
    """Run every worker's iterations; sizes in bits, bandwidths in bit/s, compute_s in s."""
    n = len(sizes)
    ready = ready_times(np.asarray(compute_s, float), staleness)
    events = sorted((ready[i, r], i, r) for i in range(n) for r in range(ready.shape[1]))
    history, names = SyncHistory(k), list(range(n))
    transfers, delivered_per_update = [], []
    result = SspResult(0.0, 0, 0, 0)
    now = 0.0
    capacity = np.r_[ingress, egress]

    def finished(transfer):
        delivered_per_update[transfer.update] += len(transfer.receivers)
        history.record(transfer.sender, transfer.receivers)

    completed_round = 0
    for time_s, sender, iteration in events:
        now = advance_transfers(transfers, now, time_s, capacity, sizes, finished)
        if iteration > completed_round:          # every worker finished an iteration
            history.advance()
            completed_round = iteration
        forced, unsynced = history.matrices(names)
        problem = RoundInput(sizes, ingress, egress, min_receivers, forced, unsynced)
        remaining, load = pending_towards(transfers, sender, n)
        started = time.perf_counter()
        decision = ssp_on_ready(sender, problem, remaining, load,
                                compute_s[sender][min(iteration + 1, len(compute_s[sender]) - 1)],
                                cost_model, policy, eta, rng)
        result.decisions_ms.append(1e3 * (time.perf_counter() - started))
        dropped = set(decision.dropped)
        for transfer in [t for t in transfers if t.sender == sender]:
            result.preempted += len(transfer.receivers & dropped)
            transfer.receivers -= dropped
            if not transfer.receivers:
                transfers.remove(transfer)
        update = len(delivered_per_update)
        delivered_per_update.append(0)
        groups = ([{j} for j in decision.receivers] if cost_model == L7
                  else [set(decision.receivers)] if decision.receivers else [])
        transfers.extend(Transfer(sender, group, float(sizes[sender]), update) for group in groups)
    advance_transfers(transfers, now, np.inf, capacity, sizes, finished)
    result.updates = len(delivered_per_update)
    result.deliveries = int(sum(delivered_per_update))
    result.multicast_scale = result.deliveries / (result.updates * n)
    return result
