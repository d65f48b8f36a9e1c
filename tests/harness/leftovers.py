"""Helpers shared by the unit and integration tests of leftovers."""

import subprocess
import sys

COMMAND = [sys.executable, "-m", "experiments.leftovers"]


def run(*args):
    return subprocess.run(COMMAND + list(args), capture_output=True, text=True, timeout=60)
