"""A gradient round's parts (experiments/traffic/gradient_parts.py), from a plan the
in-process controller makes: every worker's fragments are expected once at the PS and
at the aggregator on their way, and a repair asks whoever holds a missing fragment."""

import numpy as np
import pytest

from experiments.traffic.gradient_parts import RoundParts
from syncfabric.hosts.gradient_wire import fragment_count, gradient_floats

WORKERS, PS = ["h1", "h2", "h3"], "h4"
FLOATS = gradient_floats(1)


@pytest.fixture
def plan(controller):
    status, plan = controller.request("POST", "/ina/plans", {
        "job": "parts", "workers": WORKERS, "ps": PS, "gradient_mb": 1})
    assert status == 201
    return plan


def parts_of(plan):
    aggregators = sorted({a["aggregator"] for a in plan["aggregates"]})
    return RoundParts.of(plan, WORKERS, [PS], aggregators, FLOATS, 0.95)


def test_every_worker_is_expected_once_in_every_fragment_at_the_ps(plan):
    parts = parts_of(plan)
    everyone = sum(parts.bit.values())
    assert parts.expected[PS].tolist() == [everyone] * fragment_count(FLOATS)
    for aggregator in parts.aggregators:   # only the workers that send through it
        through = {w for w in WORKERS for node, *_ in parts.legs[w] if node == aggregator}
        assert through and set(np.unique(parts.expected[aggregator])) <= {
            0, sum(parts.bit[w] for w in through)}
    assert parts.fragments == len(WORKERS) * fragment_count(FLOATS)


def test_each_process_gets_its_role_and_the_legs_run_at_the_fraction_of_the_plan(plan):
    parts = parts_of(plan)
    messages = parts.messages({"round": 1})
    assert {messages[w]["role"] for w in WORKERS} == {"worker"} and messages[PS]["role"] == "ps"
    assert all(messages[a]["role"] == "aggregator" for a in parts.aggregators)
    planned = {leg["node"]: leg["rate_mbps"] for w in WORKERS for leg in plan["workers"][w]}
    for worker in WORKERS:
        for leg in messages[worker]["legs"]:
            node = next(n for n, address in plan["addresses"].items() if address == leg["ip"])
            assert leg["rate_mbps"] == pytest.approx(0.95 * planned[node])
    assert parts.planned_first_pass_s() > 0


def test_a_repair_asks_the_aggregator_that_holds_a_sum_and_else_the_worker(plan):
    parts = parts_of(plan)
    aggregator = parts.aggregators[0]
    worker = next(w for w in WORKERS if parts.legs[w][0][0] == aggregator)
    index = parts.legs[worker][0][2]
    bit = parts.bit[worker]
    nothing = {name: {"missing": []} for name in [*parts.aggregators, PS]}
    at_the_ps = dict(nothing, **{PS: {"missing": [[index, bit]]}})
    (resend,) = parts.repairs(at_the_ps, 0.5)[aggregator]
    assert resend["ip"] == plan["addresses"][PS] and resend["fragments"] == [[index, index + 1]]
    both = dict(at_the_ps, **{aggregator: {"missing": [[index, bit]]}})
    asked = parts.repairs(both, 0.5)
    assert list(asked) == [worker] and asked[worker][0]["ip"] == plan["addresses"][aggregator]
    assert parts.repairs(nothing, 0.5) == {}
