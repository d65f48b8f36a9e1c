"""PyTorch's own distributed tests with backend "fabric" (tests/harness/torch_suite.py),
2, 4 and 8 ranks on loopback (the suite's group tests need 8): every collective the
fabric carries goes through a job's real rounds (SYNCFABRIC_MIN_BYTES=0, so even one
float does), made by the controller stand-in of tests/harness/loopback_jobs.py. Which tests run, and why the others are
left out, is tests/integration/torch_suite_selection.txt; every test it runs must
pass, and every job the ranks made must be released."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.loopback_jobs import StubController

SELECTION = Path(__file__).with_name("torch_suite_selection.txt")
HOSTS = ",".join("w%d" % rank for rank in range(1, 9))   # rank i's fabric host
PORT = 45000   # the stand-in's jobs' first UDP port: apart from the unit tests' (29400+)


def selection():
    """{world size: [test names]} of the selection's "run" lines ("run 2,4 test_x")."""
    chosen = {}
    for line in SELECTION.read_text().splitlines():
        words = line.split()
        if words and words[0] == "run":
            for world in words[1].split(","):
                chosen.setdefault(int(world), []).append(words[2])
    return chosen


@pytest.mark.integration
@pytest.mark.parametrize("world", [2, 4, 8])
def test_pytorchs_own_distributed_tests_pass_over_the_fabric(world, tmp_path):
    names = selection()[world]
    stub = StubController(port=PORT)
    try:
        answer = subprocess.run(
            [sys.executable, "-m", "tests.harness.torch_suite", *names],
            env=dict(os.environ, WORLD_SIZE=str(world), SYNCFABRIC_CONTROLLER=stub.url,
                     SYNCFABRIC_HOSTS=HOSTS, SYNCFABRIC_MIN_BYTES="0", OMP_NUM_THREADS="1",
                     TMPDIR=str(tmp_path)),   # the suite leaves its rendezvous files
            capture_output=True, text=True, timeout=1200)
        lines = [line for line in answer.stdout.splitlines() if line.startswith("{")]
        assert lines, answer.stderr[-3000:]
        outcomes = json.loads(lines[-1])
        assert sorted(outcomes) == sorted(names)
        failed = {name: outcome for name, outcome in outcomes.items() if outcome != "passed"}
        assert not failed, json.dumps(failed, indent=1)
        assert stub.posted and stub.jobs == {}   # jobs were made, and all released
    finally:
        stub.close()
