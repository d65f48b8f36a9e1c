"""experiments.leftovers: what a dead run left is removed before the next run; a live run,
and what is not ours, are left alone."""

import subprocess

import pytest

from mininet_topos.platform_net import MANAGEMENT_BRIDGE, root_links
from tests.harness.leftovers import run
from tests.harness.testbeds import bridges


@pytest.mark.integration
def test_what_a_dead_run_left_is_removed_and_nothing_else(dead_run):
    dry = run("--dry-run")
    assert dry.returncode == 0 and "leaf7, leaf7-eth1" in dry.stderr, dry.stderr
    assert "leaf7" in bridges()
    answer = run()
    assert answer.returncode == 0, answer.stderr
    assert "removing" in answer.stderr and "br-user" not in answer.stderr
    assert "leaf7" not in bridges() and "br-user" in bridges()
    links = root_links()
    assert not {"leaf7-eth1", "spine7-eth1", MANAGEMENT_BRIDGE} & set(links)
    assert run().stderr == ""


@pytest.mark.integration
def test_a_live_run_is_reported_and_nothing_is_touched(dead_run):
    host_shell = subprocess.Popen(["bash", "-c", "exec -a 'bash --norc -is mininet:h9' sleep 60"])
    try:
        answer = run()
    finally:
        host_shell.kill()
        host_shell.wait()
    assert answer.returncode == 1
    (line,) = answer.stderr.strip().splitlines()
    assert "an emulation is running (pids %d)" % host_shell.pid in line and "mn -c" in line
    assert {"leaf7", "br-user"} <= bridges() and MANAGEMENT_BRIDGE in root_links()
