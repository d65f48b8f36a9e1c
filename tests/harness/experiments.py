"""Helpers shared by the unit and integration tests of experiments."""

import csv
import subprocess
import sys

from experiments.fidelity import MACHINE_BUSY_MAX

PORTS = ["--of-port", "16657", "--rest-port", "18084"]
SMALL = ["--spines", "2", "--leaves", "2", "--hosts-per-leaf", "2", "--bw", "10", *PORTS]


def run(module, *args):
    return subprocess.run([sys.executable, "-m", "experiments." + module, *args],
                          capture_output=True, text=True, timeout=600)


def rows(path):
    with open(path) as handle:
        return list(csv.DictReader(handle))


def kept_up_or_busy(row):
    """Whether an emulated row kept up, or its machine_busy column says the machine was
    busier than a faithful run may be (a run beside other load, as `make test` beside a
    CPU hog): what a test of an emulated run asserts is the verdict, not the machine's
    spare capacity."""
    return row["fidelity_ok"] == "True" or float(row["machine_busy"]) > MACHINE_BUSY_MAX
