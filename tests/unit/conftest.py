"""The in-process controller (every app on fake switches) as a fixture."""

import pytest

from syncfabric.hosts.datapath import DATAPATH_ENV
from tests.harness.fake_controller import InProcessController, description


@pytest.fixture
def controller():
    controller = InProcessController(description())
    yield controller
    controller.close()


@pytest.fixture(params=["native", "python"])
def each_datapath(request, monkeypatch):
    """The host code under test on each data path (SYNCFABRIC_DATAPATH), so that both pass
    the same tests."""
    monkeypatch.setenv(DATAPATH_ENV, request.param)
    return request.param
