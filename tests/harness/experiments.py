"""Helpers shared by the unit and integration tests of experiments."""

import csv
import subprocess
import sys

PORTS = ["--of-port", "16657", "--rest-port", "18084"]
SMALL = ["--spines", "2", "--leaves", "2", "--hosts-per-leaf", "2", "--bw", "10", *PORTS]


def run(module, *args):
    return subprocess.run([sys.executable, "-m", "experiments." + module, *args],
                          capture_output=True, text=True, timeout=600)


def rows(path):
    with open(path) as handle:
        return list(csv.DictReader(handle))
