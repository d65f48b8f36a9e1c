"""The layout rule: apps/*_controller.py are Ryu apps; every other module in apps/ is pure
logic (graph in, decision out) except the named Ryu-facing helpers, so the experiments
and the simulator can import them without Ryu or Mininet."""

import ast
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parent.parent / "apps"
# REST answers, barrier-confirmed batches, the services as a Ryu context, ARP frames built
# with Ryu's packet library, launch forms, state files under a Ryu config option, the
# operator's REST endpoints
RYU_FACING_HELPERS = {"rest_json.py", "installer.py", "services.py", "arp_responder.py",
                      "launch_by_path.py", "state_files.py", "operator_api.py"}
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
    assert {"multicast_trees.py", "reservations.py", "receiver_selection.py", "fabric_service.py",
            "multicast_service.py", "selmcast_service.py", "ina_service.py", "plan_moves.py",
            "switch_sync.py"} <= set(PURE_MODULES)


@pytest.mark.parametrize("module", sorted(path.name for path in APPS.glob("*.py")))
def test_no_module_reads_another_objects_private_attributes(module):
    """Apps and services meet through narrow public interfaces: no `other._thing`, no
    looking another app up, no getattr on another's object."""
    tree = ast.parse((APPS / module).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            assert isinstance(node.value, ast.Name) and node.value.id in ("self", "batch"), \
                "%s:%d reads %s" % (module, node.lineno, node.attr)
        if isinstance(node, ast.Name) and module.endswith(("_controller.py", "_service.py")):
            assert node.id not in ("lookup_service_brick", "getattr"), \
                "%s:%d uses %s" % (module, node.lineno, node.id)


@pytest.mark.parametrize("module", sorted(path.name for path in APPS.glob("*_controller.py")))
def test_apps_take_only_events_from_each_other(module):
    for node in ast.walk(ast.parse((APPS / module).read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("_controller"):
            assert all(alias.name.startswith("Event") for alias in node.names), module
