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
    (path,) = sorted(Path(folder).rglob("_native*.so"))[:1] or [None]
    if path is None:
        raise SystemExit("no _native*.so under %s: build it first (make fuzz)" % folder)
    spec = importlib.util.spec_from_file_location(NATIVE_MODULE, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[NATIVE_MODULE] = module
    return path


class Campaign:
    def __init__(self, folder, native=None):
        self.folder = Path(folder)
        self.native = load_native(native) if native is not None else None
        from experiments.fuzzing import differential, hostile   # after the extension
        self.differential, self.hostile = differential, hostile
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

    def _example(self, target, example, check):
        """Write `example` down, check it, count it; a difference is kept, not raised."""
        (self.folder / "current-example.txt").write_text(repr(example))
        counts = self.counts[target]
        counts["examples"] += 1
        try:
            check()
        except self.differential.Difference as difference:
            counts["differences"] += 1
            (self.folder / ("difference-%d.txt" % time.time())).write_text(
                "%s\n\n%r\n" % (difference, example))

    def _checker(self, target):
        """A function that runs EXAMPLES_PER_CALL examples of `target`."""
        hostile, differential, counts = self.hostile, self.differential, self.counts[target]
        shapes = st.sampled_from(sorted(hostile.LAYOUTS)).map(hostile.LAYOUTS.get)
        quick = settings(max_examples=EXAMPLES_PER_CALL, phases=[Phase.generate], database=None,
                         deadline=None, suppress_health_check=list(HealthCheck))
        if target == "scripted receives":
            @quick
            @given(shape=shapes, data=st.data())
            def check(shape, data):
                results = data.draw(hostile.scripted(*shape))
                messages = [message for message, _slot in results]
                counts["scripted_batches"] += 1
                self._example(target, results, lambda: differential.check_cutting(
                    messages, [slot for _message, slot in results], shape))
            return check
        if target == "returned sums":
            @quick
            @given(shape=shapes, data=st.data(),
                   numbers=st.lists(st.sampled_from(hostile.ROUND_EDGES), min_size=1, max_size=3,
                                    unique=True))
            def check(shape, data, numbers):
                batches = data.draw(hostile.returns(*shape))
                counts["datagrams_per_path"] += sum(map(len, batches))
                self._example(target, batches,
                              lambda: differential.check_placing(shape, batches, numbers))
            return check
        kind, cores = target.split(", ")[0], int(target.split(", ")[1][0])

        @quick
        @given(shape=shapes, data=st.data(),
               targets=st.lists(st.integers(0, cores - 1), min_size=4, max_size=4))
        def check(shape, data, targets):
            batches = list(zip(targets, data.draw(hostile.batches(*shape))))
            counts["datagrams_per_path"] += sum(len(batch) for _core, batch in batches)
            self._example(target, batches,
                          lambda: differential.check_summing(kind, cores, shape, batches))
        return check
