"""SELMCAST receiver selection (pure): constraints, round time, Pareto, SSP, the MILP, history."""

import random

import numpy as np
import pytest

from experiments.sim.fair_share import max_min_rates
from experiments.sim.ssp_rounds import simulate_ssp
from syncfabric.decisions import receiver_selection as rs
from syncfabric.decisions.receiver_selection import select
from syncfabric.decisions.selection_round import (L3, L7, MILP, RANDOM, SELMCAST, RoundInput,
                                                  SelectionError, lower_bound, multicast_scale,
                                                  normalized_completion, round_time)
from syncfabric.decisions.ssp_selection import ssp_on_ready
from syncfabric.decisions.sync_history import SyncHistory


def instance(n, seed, forced_fraction=0.1, p_fraction=0.3, sizes=None):
    rng = np.random.default_rng(seed)
    forced = rng.random((n, n)) < forced_fraction
    return RoundInput.build(np.ones(n) if sizes is None else sizes,
                            1 + 0.5 * rng.uniform(-1, 1, n), 1 + 0.5 * rng.uniform(-1, 1, n),
                            max(1, round(p_fraction * n)), forced,
                            rng.integers(1, 6, (n, n)))


POLICIES = [SELMCAST, RANDOM, MILP]


@pytest.mark.parametrize("cost_model", [L3, L7])
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", range(4))
def test_every_sender_has_p_receivers_the_forced_pairs_and_no_self(policy, cost_model, seed):
    problem = instance(8, seed, forced_fraction=0.2)
    selection = select(problem, cost_model, policy, random.Random(seed))
    x = selection.matrix()
    assert not x.diagonal().any()
    assert np.all(x.sum(axis=1) >= problem.min_receivers)
    assert np.all((x | x.T)[problem.forced])                 # one of each forced pair sends
    assert selection.t == pytest.approx(round_time(problem, x, cost_model))
    assert normalized_completion(selection, problem) >= 1 - 1e-9


def test_round_time_for_both_cost_models():
    # worker 0 sends 2 units to 1 and 2; worker 1 sends 1 unit to 2; worker 2 sends 4 to 0
    problem = RoundInput.build([2, 1, 4], ingress=[1, 1, 2], egress=[4, 1, 1], min_receivers=0)
    x = np.array([[0, 1, 1], [0, 0, 1], [1, 0, 0]], bool)
    # L3: senders 2/1, 1/1, 4/2; receivers 4/4, 2/1, 3/1
    assert round_time(problem, x, L3) == pytest.approx(3.0)
    # L7: sender 0 pays 4/1
    assert round_time(problem, x, L7) == pytest.approx(4.0)
    # LB: sum p v / sum b' is 0 here; the largest sender bound with p = 0 is 0 too
    assert lower_bound(RoundInput.build([1, 1], [1, 1], [1, 1], 1), L7) == pytest.approx(1.0)


def test_metrics_are_defined_once():
    problem = RoundInput.build([1] * 4, [1] * 4, [2, 2, 2, 2], 2)
    selection = select(problem, L3)
    assert lower_bound(problem, L3) == pytest.approx(max(8 / 8, 1 / 1))
    assert lower_bound(problem, L7) == pytest.approx(2.0)
    assert multicast_scale(selection) == pytest.approx(
        sum(map(len, selection.receivers)) / 4 / 4)


@pytest.mark.parametrize("cost_model", [L3, L7])
@pytest.mark.parametrize("seed", range(6))
def test_pareto_improvement_never_raises_t_and_only_adds(cost_model, seed):
    problem = instance(12, seed)
    x = rs._basic_selection(problem, cost_model)
    rs._rebalance(problem, x, cost_model)
    before, t = x.copy(), round_time(problem, x, cost_model)
    rs._pareto_improvement(problem, x, t, cost_model)
    assert np.all(x >= before)
    assert round_time(problem, x, cost_model) <= t * (1 + 1e-9)
    assert select(problem, cost_model).t == pytest.approx(t)


@pytest.mark.parametrize("cost_model", [L3, L7])
@pytest.mark.parametrize("seed", range(8))
def test_heuristics_never_beat_the_milp(cost_model, seed):
    problem = instance(int(np.random.default_rng(seed).integers(4, 9)), seed)
    optimum = select(problem, cost_model, MILP)
    for policy in (SELMCAST, RANDOM):
        assert select(problem, cost_model, policy, random.Random(0)).t >= optimum.t * (1 - 1e-7)
    same_t = select(problem, cost_model)
    if same_t.t <= optimum.t * (1 + 1e-7):       # at the optimal t, the MILP has the most receivers
        assert multicast_scale(same_t) <= multicast_scale(optimum) + 1e-12


def test_selmcast_spreads_load_by_egress_bandwidth():
    # egress 3, 1, 1, 1: the fast receiver takes most updates, so t beats random's
    problem = RoundInput.build([1] * 4, [10] * 4, [3, 1, 1, 1], 1)
    selection = select(problem, L3)
    assert [len(r) for r in selection.receivers] and selection.matrix()[:, 0].sum() == 3
    assert selection.t == pytest.approx(1.0)


def test_selection_is_deterministic():
    problem = instance(30, 1)
    assert select(problem, L3) == select(problem, L3)


@pytest.mark.parametrize("bad, message", [
    (dict(sizes=[1, -1]), "sizes must be 2 positive"),
    (dict(egress=[1, float("nan")]), "egress must be 2 positive"),
    (dict(min_receivers=2), "p must be between 0 and n - 1 = 1"),
    (dict(sizes=[1], ingress=[1], egress=[1]), "at least 2 workers"),
])
def test_bad_rounds_are_refused(bad, message):
    fields = dict(dict(sizes=[1, 1], ingress=[1, 1], egress=[1, 1], min_receivers=1), **bad)
    with pytest.raises(SelectionError, match=message.replace("(", r"\(")):
        RoundInput.build(**fields)


def test_unknown_policy_and_cost_model_are_refused():
    problem = instance(4, 0)
    with pytest.raises(SelectionError, match="cost_model"):
        select(problem, "L4")
    with pytest.raises(SelectionError, match="policy"):
        select(problem, L3, "flood")


def test_history_forces_pairs_unsynced_for_k_rounds_in_either_direction():
    history = SyncHistory(k=2)
    names = ["a", "b", "c"]
    for _ in range(2):
        forced, _unsynced = history.matrices(names)
        assert not forced.any()                   # nothing forced before round k + 1
        history.record_round(names, [(1,), (), ()])   # a -> b only
    forced, unsynced = history.matrices(names)
    assert not forced[0, 1] and not forced[1, 0]  # a -> b synced the pair both ways
    assert forced[0, 2] and forced[2, 0] and forced[1, 2]
    assert unsynced[0, 1] == 1 and unsynced[0, 2] == 3
    with pytest.raises(SelectionError):
        SyncHistory(0)


def test_ssp_keeps_nearly_finished_receivers_and_drops_the_rest():
    problem = RoundInput.build([10] * 5, [10] * 5, [10] * 5, 2)
    remaining = np.array([0, 2.0, 9.0, 0, 0])       # eta * v = 7.5: keep 1, drop 2
    decision = ssp_on_ready(0, problem, remaining, remaining.copy(), compute_s=1.0, cost_model=L3)
    assert decision.kept == (1,) and decision.dropped == (2,)
    assert 2 not in decision.receivers and 0 not in decision.receivers
    assert len(decision.receivers) >= 2
    random_decision = ssp_on_ready(0, problem, remaining, remaining.copy(), 1.0, L3, RANDOM,
                                   rng=random.Random(0))
    assert random_decision.kept == (1, 2) and random_decision.dropped == ()
    assert len(random_decision.receivers) == 2


def test_ssp_fills_the_compute_time_with_extra_receivers():
    problem = RoundInput.build([1] * 6, [1] * 6, [1] * 6, 1)
    idle = np.zeros(6)
    short = ssp_on_ready(0, problem, idle, idle, compute_s=1.0, cost_model=L3)
    long = ssp_on_ready(0, problem, idle, idle, compute_s=5.0, cost_model=L3)
    assert len(short.receivers) == 5                 # every receiver finishes within 1 s
    busy = np.array([0, 0, 3.0, 3.0, 3.0, 3.0])
    assert len(ssp_on_ready(0, problem, idle, busy, 1.0, L3).receivers) == 1
    assert len(ssp_on_ready(0, problem, idle, busy, 5.0, L3).receivers) == 5
    assert long.deadline == 5.0


def test_max_min_fair_rates():
    # resources: a (cap 1), b (cap 3); flow 0 uses a and b, flows 1 and 2 use b
    usage = [[1, 0, 0], [1, 1, 1]]
    assert max_min_rates(usage, [1, 3]) == pytest.approx([1, 1, 1])
    assert max_min_rates(usage, [1, 10]) == pytest.approx([1, 4.5, 4.5])


def test_ssp_simulation_delivers_and_selmcast_reaches_more_receivers():
    rng = np.random.default_rng(0)
    n = 10
    bandwidth = 1 + 0.5 * rng.uniform(-1, 1, n)
    compute = rng.uniform(0.5, 1.5, (n, 8))
    results = {policy: simulate_ssp(np.full(n, 0.1), bandwidth, bandwidth, np.full(n, 3), compute,
                                    policy, L3, rng=random.Random(0))
               for policy in (SELMCAST, RANDOM)}
    assert results[RANDOM].multicast_scale == pytest.approx(0.3, abs=0.05)
    assert results[SELMCAST].multicast_scale > 1.5 * results[RANDOM].multicast_scale
    assert results[SELMCAST].updates == n * 8
