"""Fuzz both host data paths for a given time: hostile datagrams to a shard's host and an
aggregator (one core and two) and to a worker's returned sums (an all-reduce job's
shard's, and a gather job's, whose sums carry its own worker alone), and scripted recvmmsg
results to the native receive's cutting rule, the native path built with
AddressSanitizer and UndefinedBehaviorSanitizer.

    make fuzz FUZZ_S=600     # builds the sanitized extension, then runs this:
    python -m experiments.datapath_fuzz --seconds 600 --native build/fuzz \\
        --out results/fuzz/datapath_fuzz.csv

Each target draws examples (experiments/fuzzing/hostile.py) and feeds both paths the
same (experiments/fuzzing/differential.py): any difference, exception, sanitizer report
or crash is a failure. The examples run in a child process with the sanitizers'
runtimes preloaded; each example is written to --out's folder before it runs, so a
crash leaves it behind as crash-<time>.txt, and a difference as difference-<time>.txt.
Prints a row per target and writes CSV + PNG; exits 1 on any failure.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from experiments.cli import experiment_parser, write_csv

COLUMNS = ["target", "examples", "datagrams_per_path", "scripted_batches", "differences",
           "crashes", "seconds"]
# each target's share of the time: the scripted receives also sum what they cut
TARGETS = {"shard, 1 core": 1, "shard, 2 cores": 1, "aggregator, 1 core": 1,
           "aggregator, 2 cores": 1, "returned sums": 1, "gather job's returned sums": 1,
           "scripted receives": 2}
SANITIZERS = ("libasan.so", "libubsan.so")
SANITIZER_OPTIONS = {"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:halt_on_error=1",
                     "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1"}


def parse_args(argv):
    parser = experiment_parser("experiments.datapath_fuzz", __doc__)
    parser.add_argument("--seconds", type=float, default=300,
                        help="how long to fuzz, shared by the targets (default %(default)s; "
                             "make fuzz: FUZZ_S)")
    parser.add_argument("--native", type=Path,
                        help="a build folder holding the sanitized extension (make fuzz: "
                             "build/fuzz); without it, the installed one, with no sanitizers")
    parser.add_argument("--out", type=Path, default=Path("results/fuzz/datapath_fuzz.csv"),
                        help="CSV to write (a PNG beside it; crashing inputs in its folder)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def sanitizer_environment(native):
    """The child's environment: the sanitizers' runtimes preloaded (Python is not built
    with them) and their options, when the extension in `native` was built with them."""
    environment = dict(os.environ, PYTHONFAULTHANDLER="1")
    if native is None:
        return environment
    runtimes = [subprocess.run(["gcc", "-print-file-name=%s" % name], capture_output=True,
                               text=True, check=True).stdout.strip() for name in SANITIZERS]
    missing = [r for r in runtimes if not os.path.isabs(r)]
    if missing:
        raise SystemExit("the sanitizers' runtimes are not installed (%s): apt-get install gcc"
                         % ", ".join(missing))
    environment.update(SANITIZER_OPTIONS, LD_PRELOAD=" ".join(runtimes))
    return environment


def run_child(args):
    """The parent: the child fuzzes until done or dead; a dead child's last example is
    kept. Returns the child's counts (its last report, if it died)."""
    folder = args.out.parent
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "experiments.datapath_fuzz", "--child",
               "--seconds", str(args.seconds), "--out", str(args.out)]
    if args.native is not None:
        command += ["--native", str(args.native)]
    reported = folder / "counts.json"   # the child's, after every call
    reported.unlink(missing_ok=True)
    child = subprocess.run(command, env=sanitizer_environment(args.native))
    # none if it died before its first call ended
    counts = json.loads(reported.read_text()) if reported.exists() else {"running": None}
    if child.returncode != 0:
        current = folder / "current-example.txt"
        crash = folder / ("crash-%d.txt" % time.time())
        if current.exists():
            current.rename(crash)
        dead = counts["running"] or next(iter(TARGETS))
        counts.setdefault(dead, dict.fromkeys(COLUMNS[1:], 0))["crashes"] += 1
        print("datapath_fuzz: the child died (exit %d) on the example in %s"
              % (child.returncode, crash), file=sys.stderr)
    return counts


def main(argv=None):
    args = parse_args(argv)
    if args.child:
        from experiments.fuzzing.campaign import Campaign
        Campaign(args.out.parent, args.native).run(TARGETS, args.seconds)
        return 0
    counts = run_child(args)
    rows = [dict(counts.get(target, dict.fromkeys(COLUMNS[1:], 0)), target=target)
            for target in TARGETS]
    write_csv(rows, args.out, COLUMNS)
    for row in rows:
        print("%-20s %7d examples %9d datagrams a path %7d scripted batches  %d differences  "
              "%d crashes" % (row["target"], row["examples"], row["datagrams_per_path"],
                              row["scripted_batches"], row["differences"], row["crashes"]))
    print("in all: %d datagrams to each path, %d scripted receives" % (
        sum(row["datagrams_per_path"] for row in rows), sum(row["scripted_batches"] for row in rows)))
    from experiments.plots.robustness import plot_datapath_fuzz
    print("CSV: %s  figure: %s" % (args.out, plot_datapath_fuzz(args.out)), file=sys.stderr)
    return 1 if any(row["differences"] or row["crashes"] for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
