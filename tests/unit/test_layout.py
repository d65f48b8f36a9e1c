"""The floor plan: syncfabric's layers import downward only, the library imports neither
Ryu nor Mininet nor the code that drives it, apps/ holds only what Ryu loads, and modules
stay small enough to read in one sitting."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "syncfabric"
APPS = ROOT / "apps"
# what each layer may import from the library: decisions only decisions, OpenFlow builds
# on decisions, services on both, the operator's views on everything below them; the
# host side stands alone
MAY_IMPORT = {
    "decisions": {"decisions"},
    "openflow": {"decisions", "openflow"},
    "services": {"decisions", "openflow", "services"},
    "operator": {"decisions", "openflow", "services", "operator"},
    # the host side runs on any Linux host: none of the controller's layers, and its own
    # parts in layers of their own (syncfabric/hosts/__init__.py); its root (cli) is
    # below them all
    "hosts": {"hosts"},
    "hosts.packets": {"hosts.packets"},
    "hosts.datapath": {"hosts.packets", "hosts.datapath"},
    "hosts.transport": {"hosts.packets", "hosts.datapath", "hosts.transport"},
    "hosts.jobs": {"hosts", "hosts.packets", "hosts.datapath", "hosts.transport", "hosts.jobs"},
    "hosts.patterns": {"hosts", "hosts.packets", "hosts.datapath", "hosts.transport",
                       "hosts.patterns"},
    "hosts.training": {"hosts", "hosts.packets", "hosts.jobs", "hosts.training"},
    # DDP's hook: the host side's job engine, in a PyTorch process
    "torch": {"hosts.packets", "hosts.transport", "hosts.jobs", "torch"},
}
# the commands at the top of the package (python -m syncfabric.X), and what they may import
ENTRY_POINTS = {"aggregator.py": {"hosts.jobs"}}
NEVER_IN_LIBRARY = {"ryu", "mininet", "apps", "experiments", "mininet_topos", "tests"}
# what ryu-manager loads: the apps, their shared context and REST layer, the operator's
# endpoints, ARP replies and the launch-by-path stand-in
RYU_SHIMS = {"__init__.py", "fabric_controller.py", "multicast_controller.py",
             "selmcast_controller.py", "ina_controller.py", "job_controller.py", "services.py",
             "rest_json.py", "rest_tls.py", "operator_api.py", "arp_responder.py",
             "launch_by_path.py"}
MAX_MODULE_LINES, MAX_CLASS_LINES, MAX_FUNCTION_LINES = 400, 200, 60


def library_modules():
    return sorted(path.relative_to(ROOT) for path in LIBRARY.rglob("*.py"))


def imported_modules(path):
    """Every module `path` imports, absolute and dotted (relative imports resolved)."""
    package = list(path.relative_to(ROOT).with_suffix("").parts[:-1])
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            modules.update("%s.%s" % (module, alias.name) for alias in node.names)
            modules.add(module)
    return modules


def layer_of(module):
    """The layer (a folder of syncfabric, or of its host side: hosts.jobs) a dotted module
    is in, or None."""
    parts = module.split(".")
    in_folder = len(parts) > 1 and (LIBRARY / parts[1]).is_dir()
    if parts[0] != "syncfabric" or not in_folder:
        return None
    if parts[1] == "hosts" and len(parts) > 2 and (LIBRARY / "hosts" / parts[2]).is_dir():
        return "hosts." + parts[2]
    return parts[1]


def back_arrows(path):
    """The imports of a library module that point up or sideways out of its layer."""
    layer = layer_of(".".join(path.relative_to(ROOT).with_suffix("").parts))
    shared = layer is None and path.name != "__init__.py"   # e.g. errors: below every layer
    allowed = MAY_IMPORT.get(layer, set())
    if shared and path.name in ENTRY_POINTS:
        shared, allowed = False, ENTRY_POINTS[path.name]
    wrong = set()
    for module in imported_modules(path):
        root = module.split(".")[0]
        if root in NEVER_IN_LIBRARY:
            wrong.add(module)
        target = layer_of(module)
        if root == "syncfabric" and target is not None and (shared or target not in allowed):
            wrong.add(module)
    return wrong


@pytest.mark.parametrize("module", library_modules(), ids=str)
def test_library_imports_point_down_only(module):
    assert not back_arrows(ROOT / module)


def test_a_back_arrow_is_caught(tmp_path, monkeypatch):
    decision = LIBRARY / "decisions" / "multicast_trees.py"
    text = decision.read_text()
    for arrow in ("from syncfabric.services.fabric import Fabric",
                  "from syncfabric.openflow import builders",
                  "import ryu.lib.hub", "from experiments import fidelity",
                  "from ..services import trees", "import mininet.net"):
        copy = LIBRARY / "decisions" / "_back_arrow_probe.py"
        try:
            copy.write_text(arrow + "\n" + text)
            assert back_arrows(copy), arrow
        finally:
            copy.unlink()


def test_every_library_module_is_in_a_layer():
    for module in library_modules():
        parts = module.with_suffix("").parts
        assert len(parts) == 2 or layer_of(".".join(parts)) in MAY_IMPORT, module


@pytest.mark.parametrize("probe, arrow", [
    ("packets", "from syncfabric.hosts.jobs.job_layout import JobLayout"),
    ("transport", "from syncfabric.hosts.jobs import fabric_worker"),
    ("jobs", "from syncfabric.hosts.patterns.model_transfer import parse_args"),
    ("jobs", "from syncfabric.hosts.training import digits_mlp"),
    ("patterns", "from syncfabric.hosts.jobs.job_roles import ShardNode"),
    ("datapath", "from syncfabric.hosts.transport import pacing"),
])
def test_a_host_part_importing_one_above_or_beside_it_is_caught(probe, arrow):
    copy = LIBRARY / "hosts" / probe / "_back_arrow_probe.py"
    try:
        copy.write_text(arrow + "\n")
        assert back_arrows(copy), arrow
    finally:
        copy.unlink()


def test_apps_hold_only_what_ryu_loads():
    assert {path.name for path in APPS.glob("*.py")} == RYU_SHIMS


def held_to_the_size_limits():
    """The library, the apps and the experiments: 41% of the code is experiments, held to
    the library's standard."""
    others = sorted(path.relative_to(ROOT) for folder in (APPS, ROOT / "experiments")
                    for path in folder.rglob("*.py"))
    return library_modules() + others


@pytest.mark.parametrize("module", held_to_the_size_limits(), ids=str)
def test_modules_classes_and_functions_stay_small(module):
    source = (ROOT / module).read_text()
    assert source.count("\n") <= MAX_MODULE_LINES
    for node in ast.walk(ast.parse(source)):
        length = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
        if isinstance(node, ast.ClassDef):
            assert length <= MAX_CLASS_LINES, "class %s: %d lines" % (node.name, length)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assert length <= MAX_FUNCTION_LINES, "%s(): %d lines" % (node.name, length)


@pytest.mark.parametrize("module", sorted(path.relative_to(ROOT) for path in APPS.glob("*.py"))
                         + library_modules(), ids=str)
def test_no_module_reads_another_objects_private_attributes(module):
    """Apps and services meet through narrow public interfaces: no `other._thing`, no
    looking another app up, no getattr on another's object."""
    path = ROOT / module
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            assert isinstance(node.value, ast.Name) and node.value.id in ("self", "batch"), \
                "%s:%d reads %s" % (path.name, node.lineno, node.attr)
        if isinstance(node, ast.Name) and path.parent.name in ("apps", "services"):
            assert node.id not in ("lookup_service_brick", "getattr"), \
                "%s:%d uses %s" % (path.name, node.lineno, node.id)


@pytest.mark.parametrize("module", sorted(path.name for path in APPS.glob("*_controller.py")))
def test_apps_take_only_events_from_each_other(module):
    for node in ast.walk(ast.parse((APPS / module).read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("_controller"):
            assert all(alias.name.startswith("Event") for alias in node.names), module


def run_without(packages, code):
    """Run `code` in a fresh interpreter where importing any of `packages` fails."""
    blocked = "import sys; sys.modules.update(%s)\n" % ", ".join("%s=None" % p for p in packages)
    subprocess.run([sys.executable, "-c", blocked + code], check=True, cwd=ROOT)


def test_the_library_imports_with_neither_ryu_nor_mininet_installed():
    run_without(("ryu", "mininet", "apps", "experiments", "mininet_topos"),
                "import importlib, pkgutil, syncfabric\n"
                "for module in pkgutil.walk_packages(syncfabric.__path__, 'syncfabric.'):\n"
                "    importlib.import_module(module.name)\n")


def test_jobs_and_the_capacity_check_import_without_mininet():
    """Jobs also run on plain namespaces: their harness and the calibration's capacity
    check read the data-plane settings, never Mininet."""
    run_without(("mininet",), "import experiments.traffic.jobs, experiments.platform_capacity, "
                              "experiments.namespace_fabric, experiments.controller_process\n")


def test_experiments_take_shared_settings_from_one_module_not_from_each_other():
    """A constant two experiments need lives in experiments/defaults.py (or a library
    module), not in one of the scripts that the other then imports."""
    experiments = ROOT / "experiments"
    scripts = {path.stem for path in experiments.glob("*.py")
               if '__name__ == "__main__"' in path.read_text()}
    for path in experiments.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").count(".") == 1:
                imported = node.module.split(".")[1]
                if node.module.startswith("experiments.") and imported in scripts - {path.stem}:
                    constants = [a.name for a in node.names if a.name.isupper()]
                    assert not constants, "%s imports %s from %s" % (path.name, constants, imported)


def test_inart_builds_on_grid_s_shared_parts_not_on_grid():
    """GRID's candidates (ina_problem) and repair (stream_assignment) are what GRID and
    InArt share; InArt does not reach into GRID's planner."""
    imported = imported_modules(LIBRARY / "decisions" / "inart_placement.py")
    assert "syncfabric.decisions.ina_placement" not in imported
    assert {"syncfabric.decisions.ina_problem", "syncfabric.decisions.stream_assignment"} <= imported
