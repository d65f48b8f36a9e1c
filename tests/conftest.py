"""Fixtures every test folder shares."""

import pytest

from tests.harness.fabrics import spine_leaf_view


@pytest.fixture
def view_4x4():
    return spine_leaf_view(4, 4, 2)
