"""The fuzzing itself, in experiments.datapath_fuzz's child process: each target's
examples drawn and checked on both data paths until its share of the time is spent,
every example written down before it runs (a crash leaves it behind), the counts
written after every call (counts.json) for the parent to read even if this dies."""

import importlib.util
import json
import sys
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tqdm import tqdm

EXAMPLES_PER_CALL = 200   # examples between two looks at the clock
NATIVE_MODULE = "syncfabric.hosts.datapath._native"


def load_native(folder):
    """Use the extension built in `folder` (make fuzz's sanitized one) instead of the
    installed one: it must be loaded before anything imports the data path."""
    built = sorted(Path(folder).rglob("_native*.so"))
    if not built:
        raise SystemExit("no _native*.so under %s: build it first (make fuzz)" % folder)
    path = built[0]
    spec = importlib.util.spec_from_file_location(NATIVE_MODULE, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[NATIVE_MODULE] = module
    return path


class Campaign:
    def __init__(self, folder, native=None):
        self.folder = Path(folder)
        self.native = load_native(native) if native is not None else None
        from experiments.fuzzing import targets   # after the extension
        self.targets = targets
        self.counts, self.running = {}, None

    def run(self, targets, seconds):
        """Fuzz each of `targets` ({name: weight}) for its weight's share of `seconds`."""
        started = time.monotonic()
        tqdm.write("datapath fuzz: the native data path is %s" % (
            "%s, with the sanitizers" % self.native if self.native else "the installed one"))
        with tqdm(total=round(seconds), desc="datapath fuzz", unit="s") as bar:
            for target, weight in targets.items():
                share = seconds * weight / sum(targets.values())
                self.running = target
                self.counts[target] = dict.fromkeys(
                    ("examples", "datagrams_per_path", "scripted_batches", "differences",
                     "crashes"), 0)
                self._write_counts()   # a crash in its first call is its own
                began = time.monotonic()
                check = self._checker(target)
                while time.monotonic() - began < share:
                    check()
                    self.counts[target]["seconds"] = round(time.monotonic() - began, 1)
                    self._write_counts()
                    bar.update(min(bar.total, round(time.monotonic() - started)) - bar.n)
        self.running = None
        self._write_counts()

    def _write_counts(self):
        (self.folder / "counts.json").write_text(json.dumps(dict(self.counts, running=self.running)))

    def _example(self, target, example):
        """Write `example` down, check it, count it; a difference is kept, not raised."""
        (self.folder / "current-example.txt").write_text(repr(example))
        counts = self.counts[target]
        counts["examples"] += 1
        try:
            datagrams, scripted = self.targets.check(target, example)
        except self.targets.differential.Difference as difference:
            counts["differences"] += 1
            (self.folder / ("difference-%d.txt" % time.time())).write_text(
                "%s\n\n%r\n" % (difference, example))
            return
        counts["datagrams_per_path"] += datagrams
        counts["scripted_batches"] += scripted

    def _checker(self, target):
        """A function that runs EXAMPLES_PER_CALL examples of `target`."""
        @settings(max_examples=EXAMPLES_PER_CALL, phases=[Phase.generate], database=None,
                  deadline=None, suppress_health_check=list(HealthCheck))
        @given(data=st.data())
        def check(data):
            self._example(target, self.targets.draw(target, data))
        return check
