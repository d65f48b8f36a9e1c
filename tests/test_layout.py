"""The layout rule: apps/*_controller.py are Ryu apps; every other module in apps/ is pure
logic (graph in, decision out) except the named Ryu-facing helpers, so the experiments
and the simulator can import them without Ryu or Mininet."""

import ast
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parent.parent / "apps"
# REST answers, barrier-confirmed batches, ARP frames built with Ryu's packet library, launch
# forms, state files under a Ryu config option
RYU_FACING_HELPERS = {"rest_json.py", "ofp_transactions.py", "arp_responder.py", "launch_by_path.py",
                      "state_files.py"}
PURE_MODULES = sorted(path.name for path in APPS.glob("*.py")
                      if not path.name.endswith("_controller.py")
                      and path.name not in RYU_FACING_HELPERS | {"__init__.py"})


def imported_roots(path):
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_modules_import_neither_ryu_nor_mininet(module):
    assert not imported_roots(APPS / module) & {"ryu", "mininet"}


def test_the_pure_decisions_are_there():
    assert {"multicast_trees.py", "reservations.py", "receiver_selection.py"} <= set(PURE_MODULES)
