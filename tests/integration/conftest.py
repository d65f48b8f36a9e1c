"""Everything in this folder runs real components (ryu-manager, Open vSwitch, Mininet):
it is marked `integration`, so `make unit-test` leaves it out."""

import pytest


def pytest_collection_modifyitems(items):
    for item in items:
        if "/tests/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)
