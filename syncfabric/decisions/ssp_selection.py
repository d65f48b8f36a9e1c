"""SELMCAST's SSP variant: online and preemptive, it decides for one worker that has
become ready whom to send to, given the transfers in flight, and keeps a receiver once
less than eta * v_i remains for it."""

import random as random_module
from dataclasses import dataclass

import numpy as np

from syncfabric.decisions.selection_round import (DEFAULT_ETA, L7, RANDOM, SELMCAST, TOLERANCE,
                                                  check_cost_model, sender_cost)


@dataclass(frozen=True)
class ReadyDecision:
    """What ssp_on_ready decided for the worker that became ready."""
    kept: tuple          # receivers that keep getting its previous update
    dropped: tuple       # receivers whose previous update was preempted
    receivers: tuple     # receivers of its new update
    deadline: float      # seconds from now


def ssp_on_ready(sender, round_input, remaining, load, compute_s, cost_model,
                 policy=SELMCAST, eta=DEFAULT_ETA, rng=None):
    """SSP, online and preemptive (Algorithm 2): worker `sender` has a new update.

    remaining[j]: what is left of sender's previous update for receiver j (0 if
    none); load[j]: everything in flight toward j, all senders. A previous
    transfer is kept if its pair is forced or less than eta * v_i is left of it;
    the rest are preempted and not re-selected now. The new update goes to the
    forced pairs plus the least-loaded candidates up to p_i; the deadline is
    max(compute_s, s_i / b_i, max over them of (load_j + v_i) / b'_j), the time
    the sender computes anyway or the slowest chosen receiver needs; then
    candidates, longest-unsynced first, are added while they finish by then.
    `random` keeps every previous transfer and picks p_i at random."""
    check_cost_model(cost_model)
    n, v_i = round_input.n, round_input.sizes[sender]
    egress, forced = round_input.egress, round_input.forced[sender]
    in_flight = np.flatnonzero(remaining > 0)
    if policy == RANDOM:
        kept, dropped = in_flight, np.array([], int)
    else:
        keep = forced[in_flight] | (remaining[in_flight] < eta * v_i)
        kept, dropped = in_flight[keep], in_flight[~keep]
    load = load - np.bincount(dropped, weights=remaining[dropped], minlength=n)
    chosen = forced.copy()
    available = np.ones(n, bool)
    available[[sender, *dropped.tolist()]] = False
    missing = round_input.min_receivers[sender] - int(chosen.sum())
    candidates = np.flatnonzero(available & ~chosen)
    if missing > 0 and policy == RANDOM:
        picks = (rng or random_module.Random()).sample(candidates.tolist(), missing)
        chosen[picks] = True
    elif missing > 0:
        key = (load[candidates] + v_i) / egress[candidates]
        chosen[candidates[np.argsort(key, kind="stable")[:missing]]] = True
    sending = sender_cost(round_input.sizes[[sender]], chosen[None, :], cost_model)[0]
    needs = np.r_[compute_s, sending / round_input.ingress[sender],
                  (load[chosen] + v_i) / egress[chosen]]
    deadline = float(np.max(needs))
    if policy == SELMCAST:
        unsynced = round_input.unsynced_rounds[sender]
        extras = np.flatnonzero(available & ~chosen)
        extras = extras[np.lexsort(((extras - sender) % n, -unsynced[extras]))]
        for j in extras.tolist():
            extra = v_i if cost_model == L7 else 0.0
            if (load[j] + v_i <= egress[j] * deadline * (1 + TOLERANCE)
                    and sending + extra <= round_input.ingress[sender] * deadline * (1 + TOLERANCE)):
                chosen[j] = True
                sending += extra
    return ReadyDecision(tuple(kept.tolist()), tuple(dropped.tolist()),
                         tuple(np.flatnonzero(chosen).tolist()), deadline)
