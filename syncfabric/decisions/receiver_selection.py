"""SELMCAST (Luo et al., IEEE TSC): who receives whose update in a peer-to-peer round.

The network is one big switch: worker i sends at most b_i (ingress) and
worker j receives at most b'_j (egress). Every worker i sends an update of
v_i to at least p_i receivers, and every pair {i, j} that has not synced in
the last k rounds (neither received from the other) is forced: one of the two
must send to the other. (Forcing each direction separately cannot be met
near the lower bound: a receiver would need (n - 1)/k updates per round
whatever its egress, so the weakest egress alone sets t.) The round time t is the smallest time in which
every sender and every receiver finishes:

    t = max_i max(s_i / b_i, r_i / b'_i),   r_j = sum_i v_i x_ij,
    s_i = max_j v_i x_ij (L3 multicast: one copy)  or  sum_j v_i x_ij (L7 fan-out).

Policies (all deterministic except `random`, which takes an rng):
- BSP `selmcast`, in four steps: (1) forced pairs get a direction
  (_orient_forced); (2) Basic Selection: senders with the most receivers
  already go first, each takes its missing receivers, preferring among those
  under the water level the longest-unsynced, else the least loaded
  (r_j + v_i) / b'_j, ties to the lower index (_basic_selection); (3) our
  addition, a rebalancing pass that lowers the bottleneck one receipt at a
  time (_rebalance); (4) Pareto Improvement: candidate pairs, longest-unsynced
  first, ties by ring offset (j - i) mod n then sender index so that no
  sender is favoured, each added if neither its sender nor its receiver then
  passes t; t is not raised.
- `random`: Orpheus-style baseline, the forced pairs (each sent by a random
  one of the two) then random receivers up to exactly p_i.
- `milp`: the exact lexicographic optimum with scipy's HiGHS (minimize t,
  then maximize the number of receivers at that t); for small n.
- SSP: `ssp_on_ready` decides for one worker that has become ready, given the
  transfers in flight (online, preemptive; see its docstring).

Workers are indices 0..n-1 here; the controller maps host names to them.
Sizes and bandwidths may use any units that agree (Mbit and Mbit/s give t in s).
"""

import random as random_module
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


def select(round_input, cost_model, policy=SELMCAST, rng=None):
    _check_cost_model(cost_model)
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
    return _selection(round_input, x, policy, cost_model)


def _selection(round_input, x, policy, cost_model):
    receivers = tuple(tuple(int(j) for j in np.flatnonzero(row)) for row in x)
    return Selection(receivers, round_time(round_input, x, cost_model), policy, cost_model)


def _check_cost_model(cost_model):
    if cost_model not in COST_MODELS:
        raise SelectionError("cost_model must be one of %s, got %r" % (", ".join(COST_MODELS),
                                                                      cost_model))


def _forced_pairs(round_input):
    """Each forced pair once as (i, j) with i < j, longest-unsynced first."""
    senders, receivers = np.nonzero(np.triu(round_input.forced))
    order = np.argsort(-round_input.unsynced_rounds[senders, receivers], kind="stable")
    return zip(senders[order].tolist(), receivers[order].tolist())


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

    for a, b in _forced_pairs(round_input):
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
    for a, b in _forced_pairs(round_input):
        x[(a, b) if rng.random() < 0.5 else (b, a)] = True
    for i in range(round_input.n):
        missing = round_input.min_receivers[i] - int(x[i].sum())
        if missing > 0:
            others = [j for j in range(round_input.n) if j != i and not x[i, j]]
            x[i, rng.sample(others, missing)] = True
    return x


def milp_select(round_input, cost_model, time_limit_s=60.0):
    """The exact lexicographic optimum: minimize t, then the most receivers at that t."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import lil_matrix

    _check_cost_model(cost_model)
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
    for i, j in _forced_pairs(round_input):   # one of the pair sends to the other
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
    return _selection(round_input, x, MILP, cost_model)


class SyncHistory:
    """Which pairs synced in which round: the forced pairs and the longest-unsynced order.

    A pair {i, j} synced in a round when either received the other's update.
    Rounds are counted from 1; a pair is forced in round r when it has not
    synced in rounds r - k .. r - 1, so with a history starting empty nothing
    is forced before round k + 1. Workers are named, so a job may change its
    worker set between rounds."""

    def __init__(self, k, completed_rounds=0, last=()):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise SelectionError("k must be a positive integer, got %r" % (k,))
        self.k = k
        self.completed_rounds = int(completed_rounds)
        # (name, name) sorted -> round of the pair's last sync
        self._last = {_pair(a, b): int(synced) for a, b, synced in last}

    def matrices(self, names):
        """(forced, unsynced_rounds) as symmetric n x n arrays for `names` in this order."""
        n = len(names)
        index = {name: i for i, name in enumerate(names)}
        last = np.zeros((n, n), dtype=int)
        for (a, b), synced in self._last.items():   # the pairs that ever synced, not n^2
            if a in index and b in index:
                last[index[a], index[b]] = last[index[b], index[a]] = synced
        unsynced = self.completed_rounds + 1 - last
        return (unsynced > self.k) & ~np.eye(n, dtype=bool), unsynced

    def record_round(self, names, receivers):
        """A round ended in which names[i] delivered to names[j] for j in receivers[i]."""
        for i, chosen in enumerate(receivers):
            self.record(names[i], [names[j] for j in chosen])
        self.advance()

    def record(self, sender, receiver_names):
        """Deliveries within the current round (SSP records them as they complete)."""
        for receiver in receiver_names:
            self._last[_pair(sender, receiver)] = self.completed_rounds + 1

    def advance(self):
        self.completed_rounds += 1

    def record_data(self):
        """The history as JSON-able data that from_record_data() takes back (a state file)."""
        return {"k": self.k, "completed_rounds": self.completed_rounds,
                "last": [[a, b, synced] for (a, b), synced in sorted(self._last.items())]}

    @classmethod
    def from_record_data(cls, data):
        """The history record_data() made; SelectionError, KeyError, TypeError or
        ValueError if it is not one."""
        return cls(data["k"], data["completed_rounds"], data["last"])


def _pair(a, b):
    return (a, b) if a <= b else (b, a)


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
    _check_cost_model(cost_model)
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
