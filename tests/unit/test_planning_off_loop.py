"""Planning runs off the event loop (in-process, fake switches): while an INA plan is
computed, REST calls and switch batches are answered, and capacity admitted meanwhile
is planned around, never overbooked."""

import time

import pytest
from ryu.lib import hub
from webob import Request

from syncfabric.decisions import ina_placement
from tests.harness.fake_controller import InProcessController, description

PLAN = {"job": "j", "workers": ["h1", "h2", "h3"], "ps": "h4", "gradient_mb": 1}
SLOW_S = 1.0


@pytest.fixture
def controller():
    controller = InProcessController(description())
    yield controller
    controller.close()


@pytest.fixture
def slow_planning(monkeypatch):
    """The first plan computed takes SLOW_S longer (sleeping in its own thread)."""
    plan, calls = ina_placement.plan, []

    def slow(*args, **kwargs):
        calls.append(time.monotonic())
        if len(calls) == 1:
            time.sleep(SLOW_S)
        return plan(*args, **kwargs)
    monkeypatch.setattr(ina_placement, "plan", slow)
    return calls


def answered_in_s(controller, path):
    started = time.monotonic()
    response = Request.blank(path).get_response(controller.wsgi)
    assert response.status_int == 200
    return time.monotonic() - started


def test_the_controller_answers_and_installs_while_a_plan_is_computed(controller, slow_planning):
    planning = hub.spawn(controller.request, "POST", "/ina/plans", PLAN)
    hub.sleep(0.1)
    assert slow_planning, "the plan is being computed"
    latencies = [answered_in_s(controller, "/fabric/topology") for _ in range(5)]
    status, tree = controller.request("POST", "/multicast/trees",
                                      {"source": "h1", "receivers": ["h3"], "bandwidth_mbps": 1})
    assert status == 201, tree   # computed, booked, sent and confirmed by barriers meanwhile
    assert not planning.dead and max(latencies) < 0.05, latencies
    status, plan = planning.wait()
    assert status == 201, plan


def test_capacity_taken_while_a_plan_is_computed_is_planned_around(controller, slow_planning):
    planning = hub.spawn(controller.request, "POST", "/ina/plans", PLAN)
    hub.sleep(0.1)
    status, tree = controller.request("POST", "/multicast/trees",
                                      {"source": "h1", "receivers": ["h4"], "bandwidth_mbps": 15})
    assert status == 201, tree
    status, plan = planning.wait()
    assert status == 201, plan
    assert len(slow_planning) == 2, "planned again on what the tree left"
    view, book = controller.view, controller.services.fabric.book
    for resource, reserved in book.reserved_mbps.items():
        capacity = (view.graph.edges[resource]["capacity_mbps"] if isinstance(resource, tuple)
                    else view.aggregators[resource])
        assert reserved <= capacity + 1e-6, resource
    assert plan["theta_mbps"] <= 5 + 1e-6
