"""Each traffic class's bytes where streams enter the fabric (services/class_counters.py),
through the fake datapath: datagrams of a plan's streams count as guaranteed at its
floor's meter and as borrowed at its borrowed twin, each counted once, by switch."""

import pytest
from ryu.base import app_manager

from apps.ina_controller import EventCountDrops
from syncfabric.traffic_classes import BORROWED_DSCP
from tests.harness.fake_controller import connected, description
from tests.harness.fake_openflow import FAKE_PACKET_BYTES
from tests.harness.in_process import post
from tests.unit.test_plan_admission import first_switch_outputs, udp

PLAN = {"job": "j", "workers": ["h1", "h2", "h3"], "ps": "h4", "gradient_mb": 1}


@pytest.fixture
def fabric():
    yield from connected(description())


def class_bytes(controller):
    """The INA app's timer once: {(switch, class): bytes} and {switch: bytes policed}."""
    ina_app = app_manager.lookup_service_brick("InaController")
    ina_app.send_event(ina_app.name, EventCountDrops())
    controller.settle()
    counted, policed = {}, {}
    for family in controller.services.metrics.registry.collect():
        for sample in family.samples:
            if sample.name == "syncfabric_class_bytes_total":
                counted[sample.labels["switch"], sample.labels["class"]] = sample.value
            elif sample.name == "syncfabric_floor_policed_bytes_total":
                policed[sample.labels["switch"]] = sample.value
    return counted, policed


def test_a_streams_datagrams_count_in_their_class_at_their_first_switch(fabric):
    view = fabric.view
    _, plan = post(fabric, "/ina/plans", PLAN)
    toward_ps = udp(view, view.ip("h1"), "h4", plan["port"])
    for dscp, datagrams in ((None, 3), (BORROWED_DSCP, 5)):
        packet = toward_ps if dscp is None else dict(toward_ps, ip_dscp=dscp)
        for _ in range(datagrams):
            assert first_switch_outputs(fabric, "h1", packet) != []
    leaf = view.attachment("h1")[0]
    counted, policed = class_bytes(fabric)
    assert counted[leaf, "guaranteed"] == 3 * FAKE_PACKET_BYTES
    assert counted[leaf, "borrowed"] == 5 * FAKE_PACKET_BYTES
    assert policed[leaf] == 0
    assert class_bytes(fabric)[0][leaf, "borrowed"] == 5 * FAKE_PACKET_BYTES   # counted once
