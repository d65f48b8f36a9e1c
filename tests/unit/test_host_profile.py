"""The host profile's counters (experiments/host_profile.py): each sampled function
counts for one step, perf script's lines are read, and a role's samples inside its
timed rounds become CPU per round and shares."""

import pytest

from experiments import host_profile
from experiments.host_profile import KERNEL, step_of

NATIVE = "_native.cpython-311-x86_64-linux-gnu.so"


@pytest.mark.parametrize("dso, symbol, step", [
    (KERNEL, "__schedule", "waiting and waking"),
    (KERNEL, "do_epoll_wait", "waiting and waking"),
    (KERNEL, "_raw_spin_unlock_irqrestore", "waiting and waking"),
    (KERNEL, "clear_page_erms", "memory (page faults, zeroing)"),
    ("libc.so.6", "__memset_avx512_unaligned_erms", "memory (page faults, zeroing)"),
    (KERNEL, "entry_SYSCALL_64", "kernel entry and exit"),
    (KERNEL, "srso_return_thunk", "kernel entry and exit"),
    (KERNEL, "copy_user_generic", "copies"),
    (KERNEL, "_copy_to_iter", "copies"),
    (KERNEL, "udp_recvmsg", "kernel receive"),
    (KERNEL, "__udp4_lib_rcv", "kernel receive"),
    (KERNEL, "udp_sendmsg", "kernel send"),
    (KERNEL, "dev_hard_start_xmit", "kernel send"),
    (KERNEL, "__slab_free", "other kernel"),
    (NATIVE, "add_floats", "sums"),
    (NATIVE, "add_floats.avx2", "sums"),
    (NATIVE, "recv_batch", "data path (C)"),
    ("libc.so.6", "__memmove_avx_unaligned_erms", "copies"),
    ("python3.11", "_PyEval_EvalFrameDefault", "python"),
    ("_multiarray_umath.cpython-311-x86_64-linux-gnu.so", "DOUBLE_add", "numpy"),
    ("libtorch_cpu.so", "gloo::transport::tcp::Pair::read", "Gloo's library"),
    ("libc.so.6", "malloc", "other"),
])
def test_every_function_counts_for_one_step(dso, symbol, step):
    assert step_of(dso, symbol) == step


def test_perf_scripts_lines_give_process_time_library_and_function():
    text = (" 4321/4325  41828.143209:  ffffffff815edcb9 copy_user_generic ([kernel.kallsyms])\n"
            "    0/0     41828.203268:  ffffffff821f4dab pv_native_safe_halt ([kernel.kallsyms])\n"
            " 4322/4322  41828.5:  7f2395d157d5 gloo::Pair::read(char*, long) (/lib/libtorch.so)\n"
            "garbage\n")
    assert host_profile.script_samples(text) == [
        (4321, 41828.143209, KERNEL, "copy_user_generic"),
        (0, 41828.203268, KERNEL, "pv_native_safe_halt"),
        (4322, 41828.5, "/lib/libtorch.so", "gloo::Pair::read(char*, long)")]


def test_only_a_roles_samples_inside_its_windows_count_per_timed_round():
    samples = [(1, 10.5, KERNEL, "udp_sendmsg")] * 300 + [
        (1, 10.6, NATIVE, "add_floats")] * 100 + [
        (2, 10.7, KERNEL, "udp_recvmsg")] * 50 + [
        (1, 9.0, KERNEL, "udp_sendmsg")] * 40 + [      # before the timed rounds
        (3, 10.5, KERNEL, "udp_recvmsg")] * 7           # not one of the job's processes
    windows = [(10.0, 11.0, {1: ("worker", "on"), 2: ("worker", "on")})]
    rows = host_profile.tally(samples, windows, rounds=5, frequency=1000)
    by_step = {row["step"]: row for row in rows}
    assert set(by_step) == {"kernel send", "sums", "kernel receive"}
    assert by_step["kernel send"]["cpu_ms_per_round"] == 75.0   # 300 ms over rounds 2..5
    assert by_step["kernel send"]["share"] == pytest.approx(300 / 450, abs=1e-4)
    assert by_step["kernel receive"]["samples"] == 50
