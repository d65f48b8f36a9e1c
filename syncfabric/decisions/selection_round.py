"""A SELMCAST round as one big switch: what it asks (RoundInput: sizes, ingress, egress,
receivers needed, forced pairs), the policies' names, what a policy answers
(Selection), and how an answer is measured (round time under the L3 or L7 cost model,
the lower bound, normalized completion, multicast scale). docs/selmcast-model.md has the model."""

from dataclasses import dataclass

import numpy as np

SELMCAST = "selmcast"
RANDOM = "random"
MILP = "milp"
POLICIES = (SELMCAST, RANDOM)
L3, L7 = "L3", "L7"
COST_MODELS = (L3, L7)
DEFAULT_ETA = 0.75
TOLERANCE = 1e-9


class SelectionError(ValueError):
    """The round cannot be selected as asked (bad sizes, bandwidths or p)."""


@dataclass(frozen=True)
class RoundInput:
    """One round's problem. `forced` and `unsynced_rounds` are symmetric n x n
    arrays (see SyncHistory): pairs that must sync, and rounds since they last did."""
    sizes: np.ndarray            # v_i
    ingress: np.ndarray          # b_i
    egress: np.ndarray           # b'_j
    min_receivers: np.ndarray    # p_i
    forced: np.ndarray           # bool n x n, diagonal False
    unsynced_rounds: np.ndarray  # int n x n

    @classmethod
    def build(cls, sizes, ingress, egress, min_receivers, forced=None, unsynced_rounds=None):
        n = len(sizes)
        arrays = [np.asarray(a, dtype=float) for a in (sizes, ingress, egress)]
        p = np.broadcast_to(np.asarray(min_receivers), (n,)).astype(int)
        for name, array in zip(("sizes", "ingress", "egress"), arrays):
            if array.shape != (n,) or not np.all(np.isfinite(array)) or not np.all(array > 0):
                raise SelectionError("%s must be %d positive numbers" % (name, n))
        if n < 2:
            raise SelectionError("a round needs at least 2 workers")
        if np.any(p < 0) or np.any(p > n - 1):
            raise SelectionError("p must be between 0 and n - 1 = %d" % (n - 1))
        forced = np.zeros((n, n), bool) if forced is None else np.array(forced, bool)
        forced |= forced.T
        np.fill_diagonal(forced, False)
        unsynced = (np.zeros((n, n), int) if unsynced_rounds is None
                    else np.asarray(unsynced_rounds, int))
        return cls(*arrays, p, forced, unsynced)

    @property
    def n(self):
        return len(self.sizes)


@dataclass(frozen=True)
class Selection:
    receivers: tuple   # receivers[i] = sorted tuple of j
    t: float           # the round time the assignment needs
    policy: str
    cost_model: str

    def matrix(self):
        x = np.zeros((len(self.receivers),) * 2, bool)
        for i, chosen in enumerate(self.receivers):
            x[i, list(chosen)] = True
        return x


def round_time(round_input, x, cost_model):
    """t of assignment x (bool n x n) under the cost model."""
    v = round_input.sizes
    sends = sender_cost(v, x, cost_model)
    receives = v @ x
    return float(max(np.max(sends / round_input.ingress), np.max(receives / round_input.egress)))


def sender_cost(sizes, x, cost_model):
    """s_i: what sender i puts on its ingress link."""
    counts = x.sum(axis=1)
    return sizes * (np.minimum(counts, 1) if cost_model == L3 else counts)


def lower_bound(round_input, cost_model):
    """LB = max(sum_i p_i v_i / sum_j b'_j, max_i c_i / b_i), c_i = v_i (L3) or p_i v_i (L7):
    no assignment that meets every p_i finishes sooner."""
    v, p = round_input.sizes, round_input.min_receivers
    sender = v * np.minimum(p, 1) if cost_model == L3 else v * p
    return float(max(np.sum(p * v) / np.sum(round_input.egress), np.max(sender / round_input.ingress)))


def normalized_completion(selection, round_input):
    """t / LB; 1.0 for a round with nothing to send (p = 0 everywhere and nothing forced),
    None where only forced pairs send (LB = 0 < t)."""
    bound = lower_bound(round_input, selection.cost_model)
    if bound == 0:
        return 1.0 if selection.t == 0 else None
    return selection.t / bound


def multicast_scale(selection):
    """Mean receivers per sender, divided by n."""
    n = len(selection.receivers)
    return sum(map(len, selection.receivers)) / (n * n)


def selection_of(round_input, x, policy, cost_model):
    receivers = tuple(tuple(int(j) for j in np.flatnonzero(row)) for row in x)
    return Selection(receivers, round_time(round_input, x, cost_model), policy, cost_model)


def check_cost_model(cost_model):
    if cost_model not in COST_MODELS:
        raise SelectionError("cost_model must be one of %s, got %r" % (", ".join(COST_MODELS),
                                                                      cost_model))


def forced_pairs(round_input):
    """Each forced pair once as (i, j) with i < j, longest-unsynced first."""
    senders, receivers = np.nonzero(np.triu(round_input.forced))
    order = np.argsort(-round_input.unsynced_rounds[senders, receivers], kind="stable")
    return zip(senders[order].tolist(), receivers[order].tolist())
