"""The same job on hosts that are plain network namespaces wired to OVS bridges by hand,
under ryu-manager, with Mininet impossible to import: the library and daemons need no
testbed. Nothing of the fabric is left after it. And experiments.deploy_check, which
follows docs/deploy.md command by command to a job's exact sums."""

import json
import subprocess
import sys

import pytest

from experiments.namespace_fabric import namespace_leftovers
from tests.harness.testbeds import bridges, require_root

pytestmark = pytest.mark.integration

WITHOUT_MININET = ("import sys; sys.modules['mininet'] = None; "
                   "from experiments.namespace_fabric import main; sys.exit(main(sys.argv[1:]))")


def test_a_job_runs_on_namespaces_without_mininet_and_leaves_nothing():
    require_root()
    before = bridges()
    run = subprocess.run([sys.executable, "-c", WITHOUT_MININET, "--rounds", "2",
                          "--of-port", "16668", "--rest-port", "18095"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads(run.stdout.splitlines()[-1]) == {"rounds": 2, "workers": 3, "exact": True}
    assert bridges() == before and namespace_leftovers() == []


def test_deploy_check_follows_the_guide_to_exact_sums_and_leaves_nothing():
    require_root()
    answer = subprocess.run([sys.executable, "-m", "experiments.deploy_check"],
                            capture_output=True, text=True, timeout=600)
    assert answer.returncode == 0, (answer.stdout + answer.stderr)[-3000:]
    assert "rounds exact: {'h1': [True, True, True, True, True]" in answer.stdout
    assert "switches held of ours after the release: nothing" in answer.stdout
    assert "left on the machine after removal: nothing" in answer.stdout
    assert "$ ovs-vsctl add-br spine1 -- set bridge spine1 datapath_type=netdev" in answer.stdout
