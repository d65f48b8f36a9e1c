"""An install for each role (setup.cfg's extras), each into an empty virtual environment
from this checkout, as on a real host: what the role runs imports, the native data path
is built, and what the other roles need is not installed."""

import subprocess
import sys
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[2]
HOST_MODULES = ["syncfabric.aggregator", "syncfabric.hosts.jobs.fabric_worker",
                "syncfabric.hosts.jobs.job_daemon", "syncfabric.hosts.jobs.job_worker",
                "syncfabric.hosts.datapath._native"]
ROLES = {   # extra: (modules it must import, distributions it must not bring)
    "": (HOST_MODULES, ["torch", "ryu", "eventlet", "scipy", "networkx", "matplotlib",
                        "sklearn", "tqdm", "prometheus_client"]),
    "torch": (HOST_MODULES + ["syncfabric.torch.hook"],   # torch brings networkx itself
              ["ryu", "eventlet", "scipy", "matplotlib", "sklearn"]),
    "controller": (["ryu.base.app_manager", "syncfabric.services.jobs",
                    "syncfabric.operator.metrics", "apps.job_controller"],
                   ["torch", "matplotlib", "sklearn", "tqdm"]),
}


@pytest.mark.integration
@pytest.mark.parametrize("extra", list(ROLES))
def test_each_role_installs_alone_and_imports_what_it_runs(extra, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    target = str(CHECKOUT) + ("[%s]" % extra if extra else "")
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "-q",
                                "--disable-pip-version-check", target],
                               capture_output=True, text=True, timeout=900)
    assert installed.returncode == 0, installed.stderr[-3000:]
    # the checkout's apps/ (which the controller runs from it), not its syncfabric/
    runs_from = tmp_path / "checkout-apps"
    runs_from.mkdir()
    (runs_from / "apps").symlink_to(CHECKOUT / "apps")
    wanted, unwanted = ROLES[extra]
    check = ("import importlib, importlib.util, syncfabric\n"
             "assert %r not in syncfabric.__file__, syncfabric.__file__\n"
             "for name in %r:\n"
             "    importlib.import_module(name)\n"
             "print(sorted(n for n in %r if importlib.util.find_spec(n) is not None))\n"
             % (str(CHECKOUT), wanted, unwanted))
    answer = subprocess.run([str(venv / "bin" / "python"), "-c", check], cwd=runs_from,
                            capture_output=True, text=True, timeout=300,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(runs_from)})
    assert answer.returncode == 0, answer.stderr[-3000:]
    assert answer.stdout.strip() == "[]", "installed for another role: " + answer.stdout
