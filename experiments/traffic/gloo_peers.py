"""Gloo in a testbed: the ranks of syncfabric/hosts/training/gloo_peers.py (or another rank
program) started in the hosts, bound to their data-plane interfaces, rank 0's rows read
as they come."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from syncfabric.hosts.training.gloo_peers import TIMEOUT_S

GLOO_PORT = 29500    # rank 0's rendezvous port, on its data-plane address
TAIL_CHARS = 600     # of a failed rank's stderr, in the error


class RanksFailed(RuntimeError):
    """A rank ended in error. The message has the end of each failed rank's stderr and
    the folder where every rank's stderr was kept (a rank that waited for another ends
    well, and may say more of why); `rows` are rank 0's rows from before the end."""

    def __init__(self, message, rows):
        super().__init__(message)
        self.rows = rows


def run_in_fabric(bed, workers, ps, floats, rounds, patterns, seed=0, on_row=lambda row: None):
    """Run the peers in the testbed's hosts (the workers' ranks in order, then the PS if
    given); returns rank 0's rows, handing each to on_row as it arrives."""
    return run_ranks(bed, list(workers) + ([ps] if ps else []), "syncfabric.hosts.training.gloo_peers",
                     ["--workers", str(len(workers)), "--floats", str(floats), "--rounds",
                      str(rounds), "--patterns", ",".join(patterns), "--seed", str(seed)], on_row)


def run_ranks(bed, names, module, arguments, on_row=lambda row: None):
    """Start `python -m module` in each named host as rank i of len(names), Gloo bound to
    the host's data-plane interface and rank 0's data-plane address the rendezvous;
    returns rank 0's JSON rows, handing each to on_row as it arrives. RanksFailed if a
    rank fails."""
    master = "%s:%d" % (bed.address(names[0]), GLOO_PORT)
    processes = []
    for rank, name in enumerate(names):
        environment = dict(os.environ, GLOO_SOCKET_IFNAME=bed.interface(name), OMP_NUM_THREADS="1")
        processes.append(bed.popen(
            name, [sys.executable, "-m", module, "--name", name, "--data-ip", bed.address(name),
             "--rank", str(rank), "--world", str(len(names)), "--master", master, *arguments],
            env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    rows = []
    try:
        for line in processes[0].stdout:
            if line.startswith("{"):
                rows.append(json.loads(line))
                on_row(rows[-1])
        failed = [name for name, p in zip(names, processes) if p.wait(timeout=TIMEOUT_S) != 0]
        errors = {name: p.communicate(timeout=TIMEOUT_S)[1]
                  for name, p in zip(names, processes)} if failed else {}
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    if failed:
        raise RanksFailed("ranks failed: %s; every rank's stderr is in %s" % (
            "; ".join("%s: %s" % (name, errors[name][-TAIL_CHARS:]) for name in failed),
            kept_stderr(errors)), rows)
    return rows


def kept_stderr(errors):
    """Write each rank's stderr ({host: text}) to <host>.log in a new folder; its path."""
    folder = Path(tempfile.mkdtemp(prefix="syncfabric-ranks-"))
    for name, text in errors.items():
        (folder / ("%s.log" % name)).write_text(text or "")
    return folder
