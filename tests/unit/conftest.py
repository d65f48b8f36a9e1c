"""The in-process controller (every app on fake switches) as a fixture."""

import pytest

from tests.harness.fake_controller import InProcessController, description


@pytest.fixture
def controller():
    controller = InProcessController(description())
    yield controller
    controller.close()
