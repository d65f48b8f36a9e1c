"""SELMCAST (Luo et al., IEEE TSC): who receives whose update in a peer-to-peer round.
Policies: `selmcast` (BSP: forced pairs oriented, Basic Selection, our rebalancing,
Pareto Improvement), `random` (Orpheus-style random p receivers after the forced
pairs) and `milp` (the exact optimum, selection_milp). The round's model is in
selection_round; SSP in ssp_selection; docs/selmcast-model.md explains each step.
"""

import random as random_module

import numpy as np

from syncfabric.decisions.selection_milp import milp_select
from syncfabric.decisions.selection_round import (L7, MILP, POLICIES, RANDOM, SELMCAST, TOLERANCE,
                                                  SelectionError, check_cost_model, forced_pairs,
                                                  lower_bound, round_time, selection_of,
                                                  sender_cost)


def select(round_input, cost_model, policy=SELMCAST, rng=None):
    check_cost_model(cost_model)
    if policy == SELMCAST:
        x = _basic_selection(round_input, cost_model)
        _rebalance(round_input, x, cost_model)
        t = round_time(round_input, x, cost_model)
        _pareto_improvement(round_input, x, t, cost_model)
    elif policy == RANDOM:
        x = _random_selection(round_input, rng or random_module.Random())
    elif policy == MILP:
        return milp_select(round_input, cost_model)
    else:
        raise SelectionError("policy must be one of %s, got %r" % (", ".join(POLICIES), policy))
    return selection_of(round_input, x, policy, cost_model)


def _orient_forced(round_input, cost_model):
    """x with every forced pair given a direction. A sender still short of p_i pays
    nothing extra for it (the receipt counts toward p_i), so that direction comes
    first; then the one that leaves the receiver's egress (and, for L7, the
    sender's ingress) least loaded."""
    v, egress, ingress = round_input.sizes, round_input.egress, round_input.ingress
    p = round_input.min_receivers
    x = np.zeros((round_input.n,) * 2, bool)
    load, sent = np.zeros(round_input.n), np.zeros(round_input.n, int)

    def cost(sender, receiver):
        level = (load[receiver] + v[sender]) / egress[receiver]
        if cost_model == L7:
            level = max(level, max(sent[sender] + 1, p[sender]) * v[sender] / ingress[sender])
        return (sent[sender] >= p[sender], level)

    for a, b in forced_pairs(round_input):
        sender, receiver = (a, b) if cost(a, b) <= cost(b, a) else (b, a)
        x[sender, receiver] = True
        load[receiver] += v[sender]
        sent[sender] += 1
    return x


def _basic_selection(round_input, cost_model):
    """Each sender, most receivers first, takes its missing receivers. Receivers it can
    load without passing the water level (the lower bound, or the forced load if
    that is higher) do not raise t, so among them the longest-unsynced come first;
    the rest by least load (r_j + v_i) / b'_j. Rotating pairs this way keeps the
    k-rule from forcing many pairs at once."""
    x = _orient_forced(round_input, cost_model)
    v, egress, n = round_input.sizes, round_input.egress, round_input.n
    load = v @ x
    level = max(lower_bound(round_input, cost_model), float(np.max(load / egress)))
    counts = x.sum(axis=1)
    for i in sorted(range(n), key=lambda i: (-counts[i], i)):
        missing = round_input.min_receivers[i] - counts[i]
        if missing <= 0:
            continue
        key = (load + v[i]) / egress
        key[i] = np.inf
        key[x[i]] = np.inf
        fits = key <= level * (1 + TOLERANCE)
        order = np.lexsort((key, -np.where(fits, round_input.unsynced_rounds[i], 0), ~fits))
        chosen = order[:missing]
        x[i, chosen] = True
        load[chosen] += v[i]
    return x


class _Rebalance:
    """The state _rebalance changes: x, each receiver's load and each sender's copies."""

    def __init__(self, round_input, x, cost_model):
        self.v, self.ingress, self.egress = round_input.sizes, round_input.ingress, round_input.egress
        self.forced, self.p, self.x = round_input.forced, round_input.min_receivers, x
        self.load, self.counts = self.v @ x, x.sum(axis=1)
        self.per_copy = cost_model == L7

    def sending(self, i, count):
        return self.v[i] * (count if self.per_copy else min(count, 1))

    def least_loaded(self, sender, excluded):
        options = (self.load + self.v[sender]) / self.egress
        options[[sender, *excluded]] = np.inf
        options[self.x[sender]] = np.inf
        target = int(np.argmin(options))
        return None if np.isinf(options[target]) else target

    def worst_after(self, removed, added):
        """The largest time among the links that (removed, added) pairs touch."""
        receive, send = {}, {}
        for pairs, sign in ((removed, -1), (added, +1)):
            for a, b in pairs:
                receive[b] = receive.get(b, self.load[b]) + sign * self.v[a]
                send[a] = send.get(a, self.counts[a]) + sign
        return max([r / self.egress[j] for j, r in receive.items()]
                   + [self.sending(i, c) / self.ingress[i] for i, c in send.items()])

    def reversal(self, i, j):
        """Forced i -> j becomes j -> i, plus i -> replacement if i needs one."""
        added = [(j, i)]
        if self.counts[i] - 1 < self.p[i]:
            target = self.least_loaded(i, [j])
            if target is None:
                return None
            added.append((i, target))
        return [(i, j)], added

    def candidates(self):
        """(t, the changes at the bottleneck): receipts moved away from the busiest
        receiver, or forced pairs reversed at the busiest sender."""
        x, forced = self.x, self.forced
        receive_time = self.load / self.egress
        send_time = np.array([self.sending(i, c) for i, c in enumerate(self.counts)]) / self.ingress
        t = max(receive_time.max(), send_time.max())
        moves = []
        if receive_time.max() >= send_time.max():
            j = int(np.argmax(receive_time))
            for i in np.flatnonzero(x[:, j]).tolist():
                if forced[i, j] and not x[j, i]:
                    moves.append(self.reversal(i, j))
                elif not forced[i, j] or x[j, i]:
                    target = self.least_loaded(i, [j])
                    moves.append(None if target is None else ([(i, j)], [(i, target)]))
        else:
            i = int(np.argmax(send_time))
            moves = [self.reversal(i, j)
                     for j in np.flatnonzero(x[i] & forced[i] & ~x[:, i]).tolist()]
        return t, [move for move in moves if move is not None]

    def apply(self, removed, added):
        for pairs, sign in ((removed, -1), (added, +1)):
            for a, b in pairs:
                self.x[a, b] = sign > 0
                self.load[b] += sign * self.v[a]
                self.counts[a] += sign


def _rebalance(round_input, x, cost_model, max_moves=None):
    """Lower the bottleneck while a single change does (x is changed in place).

    Changes: move one of the bottleneck receiver's receipts to the least-loaded
    receiver its sender may still use; or reverse a forced pair at the
    bottleneck (receiver, or L7 sender), its old sender taking the least-loaded
    replacement if it would fall short of p_i. A change is taken only if every
    link it touches ends strictly below the old t, so t never rises. Greedy
    Basic Selection leaves the last senders few choices; on small rounds that
    alone can cost 10-50% of t."""
    state = _Rebalance(round_input, x, cost_model)
    for _ in range(max_moves if max_moves is not None else 4 * round_input.n):
        t, moves = state.candidates()
        scored = [(state.worst_after(*move), move) for move in moves]
        scored = [(score, move) for score, move in scored if score < t]
        if not scored:
            return
        state.apply(*min(scored, key=lambda item: item[0])[1])


def _pareto_order(round_input, x):
    """Candidate pairs (i, j), longest-unsynced first, then ring offset, then sender."""
    n = round_input.n
    senders, receivers = np.nonzero(~x & ~np.eye(n, dtype=bool))
    offsets = (receivers - senders) % n
    order = np.lexsort((senders, offsets, -round_input.unsynced_rounds[senders, receivers]))
    return senders[order], receivers[order]


def _pareto_improvement(round_input, x, t, cost_model):
    """Add pairs while no sender or receiver passes t (x is changed in place)."""
    v, ingress, egress = round_input.sizes, round_input.ingress, round_input.egress
    receive_limit = (egress * t * (1 + TOLERANCE)).tolist()
    send_limit = (ingress * t * (1 + TOLERANCE)).tolist()
    load = (v @ x).tolist()
    sending = sender_cost(v, x, cost_model).tolist()
    sizes = v.tolist()
    per_copy = cost_model == L7
    added_i, added_j = [], []
    for i, j in zip(*(a.tolist() for a in _pareto_order(round_input, x))):
        size = sizes[i]
        if load[j] + size > receive_limit[j]:
            continue
        extra = size if per_copy or sending[i] == 0 else 0.0
        if sending[i] + extra > send_limit[i]:
            continue
        load[j] += size
        sending[i] += extra
        added_i.append(i)
        added_j.append(j)
    x[added_i, added_j] = True


def _random_selection(round_input, rng):
    x = np.zeros((round_input.n,) * 2, bool)
    for a, b in forced_pairs(round_input):
        x[(a, b) if rng.random() < 0.5 else (b, a)] = True
    for i in range(round_input.n):
        missing = round_input.min_receivers[i] - int(x[i].sum())
        if missing > 0:
            others = [j for j in range(round_input.n) if j != i and not x[i, j]]
            x[i, rng.sample(others, missing)] = True
    return x
