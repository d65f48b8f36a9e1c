"""Benchmark: where a round's CPU goes on the hosts, by role and by step, sampled by
perf over experiments.host_allreduce's timed rounds (2..R): Gloo's ranks, then ours
with dedicated shards on the native data path, GSO off and on.

    python -m experiments.host_profile --network loopback --size 64 --rounds 14 \\
        --out results/host_profile.csv

--mtu sets the data plane's MTU (9000; host_allreduce's --mtus): at 65535 a datagram
is too big for GSO to send in runs, and only the GSO-off rows are taken.

`perf record -a` samples every CPU at --frequency; only the samples taken during the
timed rounds count (by their CLOCK_MONOTONIC stamps). Each counts for the process it
hit (a worker, a shard's host or a Gloo rank) and for a step, by the function it hit
(STEP_RULES, first match): waiting and waking threads, memory (page faults on new
pages, and zeroing), kernel entry and exit (system calls and the mitigations' thunks),
copies between the kernel and the process (and within it: a worker placing its sums),
the kernel's receive and send paths, sums, our C data path's other work, Python,
numpy (the benchmark's own values and checks are there too), Gloo's library, and the
rest. Self time only: a step is where the CPU was, not who called it. CSV columns:
role, gso, step, samples, cpu_ms_per_round, share (of the role's samples), and the
machine's kernel, cpu_model and mitigations. Root; run it alone.
"""

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tqdm import tqdm

from experiments import host_allreduce, machine_facts
from experiments.cli import experiment_parser, write_csv
from experiments.host_jobs import host_names
from experiments.host_network import MTU, NETWORKS, HostNetwork

COLUMNS = ["role", "gso", "step", "samples", "cpu_ms_per_round", "share",
           *machine_facts.COLUMNS]
KERNEL = "[kernel.kallsyms]"
# (step, the dso it must be in: "kernel", "native", or None for any, symbol pattern)
STEP_RULES = [
    ("waiting and waking", "kernel", r"schedule|futex|epoll|ep_poll|do_select|do_sys_poll|"
                                     r"poll_schedule|hrtimer|finish_task_switch|pick_next|"
                                     r"default_idle|cpu_idle|wake_up|_raw_spin_unlock_irq"),
    ("memory (page faults, zeroing)", None, r"clear_page|page_fault|handle_mm_fault|alloc_pages|"
                                            r"frozen_pages|get_page_from_freelist|folio|"
                                            r"lruvec|rmqueue|free_unref|zap_|do_anonymous|"
                                            r"memset"),
    ("kernel entry and exit", "kernel", r"entry_SYSCALL|syscall_return|do_syscall|syscall_exit|"
                                        r"exit_to_user|_thunk|srso|retbleed|__x64_sys"),
    ("copies", None, r"copy_user|_copy_to_iter|_copy_from_iter|copy_page|rep_movs|memcpy|"
                     r"memmove|csum_partial_copy"),
    ("kernel receive", "kernel", r"recv|rcv|gro|skb_consume|udp_queue|__skb_datagram|netif_rx|"
                                 r"napi|backlog|softirq|net_rx|skb_release|kfree_skb"),
    ("kernel send", "kernel", r"send|xmit|output|udp_push|ip_make_skb|ip_append|alloc_skb|"
                              r"dev_queue|segment|gso|ip_finish|ip_local_out|neigh"),
    ("sums", "native", r"add_floats|sum_fragments|place_sums"),
    ("data path (C)", "native", r""),
]
OTHER_STEPS = ["python", "numpy", "Gloo's library", "other kernel", "other"]
STEPS = [step for step, _dso, _pattern in STEP_RULES] + OTHER_STEPS


def step_of(dso, symbol):
    """The step a sample in `symbol` of `dso` (as perf names them) counts for."""
    native = "_native" in dso
    kernel = dso == KERNEL
    for step, where, pattern in STEP_RULES:
        if (where == "kernel" and not kernel) or (where == "native" and not native):
            continue
        if re.search(pattern, symbol):
            return step
    if "numpy" in dso or "multiarray" in dso:   # before python: numpy's are cpython-311 .so
        return "numpy"
    if "torch" in dso or "gloo" in dso:
        return "Gloo's library"
    if "python" in dso:
        return "python"
    return "other kernel" if kernel else "other"


SAMPLE = re.compile(r"^\s*(\d+)/\d+\s+([\d.]+):\s+[0-9a-f]+\s+(.*)\s+\((.*)\)$")


def script_samples(text):
    """[(pid, time, dso, symbol)] of `perf script -F pid,tid,time,ip,sym,dso`."""
    found = []
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match:
            pid, at, symbol, dso = match.groups()
            found.append((int(pid), float(at), dso, symbol.strip()))
    return found


class Perf:
    """`perf record -a` at `frequency`, its samples stamped with CLOCK_MONOTONIC (the
    clock of time.monotonic()), so that only those inside a window() count: neither
    start-up nor the untimed first round."""

    def __init__(self, data, frequency):
        self.data = data
        self.process = subprocess.Popen(["perf", "record", "-q", "-a", "-F", str(frequency),
                                         "-k", "CLOCK_MONOTONIC", "-o", str(data)])
        self.windows = []   # (start, end, {pid: (role, gso)})
        while not data.exists() and self.process.poll() is None:
            time.sleep(0.05)   # recording once its file is there
        if self.process.poll() is not None:
            raise RuntimeError("perf record ended at once (exit %d)" % self.process.returncode)

    @contextlib.contextmanager
    def window(self, roles):
        """Samples of the processes in `roles` ({pid: (role, gso)}) from here to the end."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.windows.append((start, time.monotonic(), roles))

    def stop(self):
        """Stop recording; the samples as script_samples gives them."""
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=120)
        return script_samples(subprocess.run(
            ["perf", "script", "-i", str(self.data), "-F", "pid,tid,time,ip,sym,dso"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=True).stdout)


def profile(args, folder):
    """(samples, Perf.windows, host_allreduce's rows): Gloo's ranks, then ours with GSO
    off and on, each sampled over rounds 2..R only."""
    options = host_allreduce.parse_args(["--workers", str(args.workers), "--shards",
                                         str(args.shards), "--rounds", str(args.rounds),
                                         "--mtus", str(args.mtu), "--placements", "dedicated",
                                         "--datapaths", "native"])
    environment = host_allreduce.environment_of_hosts()
    workers, servers = host_names(args.workers, args.shards, "dedicated")
    rows = []
    perf = Perf(Path(folder) / "perf.data", args.frequency)
    samples = None
    try:
        with HostNetwork(args.network, workers + servers, args.mtu) as network:
            def steady(role_of_name, gso):
                def sampled(processes):   # `ip netns exec` execs: each Popen's pid is its host's
                    return perf.window({process.pid: (role_of_name(name), gso)
                                        for name, process in processes.items()})
                return sampled
            rows.append(host_allreduce.gloo_row(network, options, args.size, environment,
                                                steady(lambda name: "gloo", "-")))
            job = host_allreduce.write_job(network, options, args.size, "dedicated", folder)
            for variant in tqdm(host_allreduce.variants(options, args.mtu),
                                desc="data path, GSO"):
                gso = variant[2]
                rows.append(host_allreduce.our_row(
                    network, options, args.size, variant, job,
                    environment, steady(lambda name: "worker" if name in workers else "shard",
                                        gso)))
    finally:
        samples = perf.stop()
    return samples, perf.windows, rows


def tally(samples, windows, rounds, frequency):
    """CSV rows: every role's samples per step in its windows (rounds 2..R), as CPU per
    round and as its share of the role's."""
    counts = Counter()
    for pid, at, dso, symbol in samples:
        for start, end, roles in windows:
            if pid in roles and start <= at <= end:
                counts[roles[pid] + (step_of(dso, symbol),)] += 1
    totals = Counter()
    for (role, gso, _step), count in counts.items():
        totals[role, gso] += count
    machine = machine_facts.csv_columns()
    return [{"role": role, "gso": gso, "step": step, "samples": counts[role, gso, step],
             "cpu_ms_per_round": round(counts[role, gso, step] / frequency * 1000 / (rounds - 1),
                                       2),
             "share": round(counts[role, gso, step] / totals[role, gso], 4), **machine}
            for role, gso in sorted(totals) for step in STEPS if counts[role, gso, step]]


def parse_args(argv):
    parser = experiment_parser("experiments.host_profile", __doc__)
    parser.add_argument("--network", choices=NETWORKS, default="loopback")
    parser.add_argument("--size", type=float, default=64.0, help="buffer in MiB (default 64)")
    parser.add_argument("--rounds", type=int, default=14,
                        help="per data path (default 14: a shard host's first rounds, 4 "
                             "of 32 MB, get new sums arrays; later ones use them again)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--mtu", type=int, default=MTU,
                        help="the data plane's MTU, Gloo's and ours (default %d; up to %d: "
                             "host_allreduce --mtus)" % (MTU, host_allreduce.BIGGEST_MTU))
    parser.add_argument("--frequency", type=int, default=999, help="samples per second per CPU")
    parser.add_argument("--out", type=Path, default=Path("results/host_profile.csv"))
    args = parser.parse_args(argv)
    if args.rounds < 2 or args.workers < 2 or args.shards < 1 or args.size <= 0 \
            or args.frequency < 1:
        parser.error("needs --rounds >= 2 (the first is not sampled), --workers >= 2, "
                     "--shards >= 1, a positive --size and --frequency")
    if not host_allreduce.ipv4_mtu(args.mtu):
        parser.error("--mtu: " + host_allreduce.MTU_RANGE)
    return args


def main(argv=None):
    args = parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("error: perf samples every CPU and the hosts run in network namespaces: "
                 "run it as root")
    with tempfile.TemporaryDirectory() as folder:
        samples, windows, runs = profile(args, folder)
    rows = tally(samples, windows, args.rounds, args.frequency)
    write_csv(rows, args.out, COLUMNS)
    for run in runs:
        print("%s gso %s: %.4f s a round, CPU %.4f s a round (the processes' own count)" % (
            run["datapath"], run["gso"], run["round_s"], run["cpu_s"]))
    print("%-7s %-3s %s" % ("role", "gso", "  ".join("%s" % step for step in STEPS)))
    for role, gso in sorted({(row["role"], row["gso"]) for row in rows}):
        share = {row["step"]: row for row in rows if (row["role"], row["gso"]) == (role, gso)}
        print("%-7s %-3s %s" % (role, gso, "  ".join(
            "%s %.0f%% (%.1f ms)" % (step, share[step]["share"] * 100,
                                      share[step]["cpu_ms_per_round"])
            for step in STEPS if step in share)))
    print("CSV: %s" % args.out)


if __name__ == "__main__":
    main()
