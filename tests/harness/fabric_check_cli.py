"""Helpers shared by the unit and integration tests of fabric_check_cli."""

import subprocess
import sys

COMMAND = [sys.executable, "-m", "experiments.fabric_check"]
SMALL = ["--spines", "1", "--leaves", "2", "--hosts-per-leaf", "1", "--tcp-seconds", "2"]
OF_PORT, REST_PORT = 16654, 18081


def run(*args, env=None):
    return subprocess.run(COMMAND + list(args), capture_output=True, text=True, timeout=300, env=env)


def assert_one_line_error(answer, status, text):
    assert answer.returncode == status
    lines = answer.stderr.strip().splitlines()
    assert len(lines) == 1 and text in lines[0], answer.stderr
