"""The host profile's counters (experiments/host_profile.py): each sampled function
counts for one step, perf's report is read line by line, and a role's samples become
CPU per round and shares."""

import pytest

from experiments import host_profile
from experiments.host_profile import KERNEL, step_of

NATIVE = "_native.cpython-311-x86_64-linux-gnu.so"


@pytest.mark.parametrize("dso, symbol, step", [
    (KERNEL, "__schedule", "waiting"),
    (KERNEL, "do_epoll_wait", "waiting"),
    (KERNEL, "entry_SYSCALL_64", "kernel entry and exit"),
    (KERNEL, "srso_return_thunk", "kernel entry and exit"),
    (KERNEL, "copy_user_generic", "copies"),
    (KERNEL, "_copy_to_iter", "copies"),
    (KERNEL, "udp_recvmsg", "kernel receive"),
    (KERNEL, "__udp4_lib_rcv", "kernel receive"),
    (KERNEL, "udp_sendmsg", "kernel send"),
    (KERNEL, "dev_hard_start_xmit", "kernel send"),
    (KERNEL, "__slab_free", "other kernel"),
    (NATIVE, "copy_big_endian", "byte order"),
    (NATIVE, "load_big_endian", "byte order"),
    (NATIVE, "add_big_endian", "sums"),
    (NATIVE, "recv_batch", "data path (C)"),
    ("libc.so.6", "__memmove_avx_unaligned_erms", "copies"),
    ("python3.11", "_PyEval_EvalFrameDefault", "python"),
    ("_multiarray_umath.cpython-311-x86_64-linux-gnu.so", "DOUBLE_add", "numpy"),
    ("libtorch_cpu.so", "gloo::transport::tcp::Pair::read", "Gloo's library"),
    ("libc.so.6", "malloc", "other"),
])
def test_every_function_counts_for_one_step(dso, symbol, step):
    assert step_of(dso, symbol) == step


def test_the_report_gives_samples_process_library_and_function():
    text = ("# Samples: 1K of event 'cpu-clock:ppp'\n"
            "#\n"
            "    12.50%|250|  4321:python3|[kernel.kallsyms]|[k] copy_user_generic\n"
            "     1.00%|20|  4322:python3|" + NATIVE + "|[.] add_big_endian\n"
            "\n")
    assert host_profile.report_lines(text) == [
        (250, 4321, KERNEL, "copy_user_generic"), (20, 4322, NATIVE, "add_big_endian")]


def test_a_roles_samples_become_cpu_per_timed_round_and_shares():
    lines = [(300, 1, KERNEL, "udp_sendmsg"), (100, 1, NATIVE, "copy_big_endian"),
             (50, 2, KERNEL, "udp_recvmsg"), (7, 3, KERNEL, "udp_recvmsg")]   # 3: not ours
    rows = host_profile.tally(lines, {1: ("worker", "on"), 2: ("worker", "on")}, rounds=5,
                              frequency=1000)
    by_step = {row["step"]: row for row in rows}
    assert set(by_step) == {"kernel send", "byte order", "kernel receive"}
    assert by_step["kernel send"]["cpu_ms_per_round"] == 75.0   # 300 ms over rounds 2..5
    assert by_step["kernel send"]["share"] == pytest.approx(300 / 450, abs=1e-4)
    assert by_step["kernel receive"]["samples"] == 50
