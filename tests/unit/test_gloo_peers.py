"""The Gloo baseline's peers on loopback: exact sums, checked; a wrong one is caught."""

import json
import os
import socket
import subprocess
import sys

from syncfabric.hosts.training import gloo_peers


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def peers(world, workers, floats, rounds, patterns):
    master = "127.0.0.1:%d" % free_port()
    environment = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    processes = [subprocess.Popen(
        [sys.executable, "-m", "syncfabric.hosts.training.gloo_peers", "--name", "h%d" % rank,
         "--data-ip", "127.0.0.1", "--rank", str(rank), "--world", str(world),
         "--workers", str(workers), "--master", master, "--floats", str(floats),
         "--rounds", str(rounds), "--patterns", patterns],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for rank in range(world)]
    outputs = [process.communicate(timeout=120) for process in processes]
    assert all(process.returncode == 0 for process in processes), [err for _out, err in outputs]
    return [json.loads(line) for line in outputs[0][0].splitlines()]


def test_three_workers_and_a_ps_get_exact_sums_and_parameters_every_round():
    rows = peers(world=4, workers=3, floats=100_003, rounds=2, patterns="allreduce,ps")
    assert [(r["pattern"], r["round"]) for r in rows] == [
        ("allreduce", 1), ("ps", 1), ("allreduce", 2), ("ps", 2)]
    assert all(r["verified"] for r in rows)
    assert all(r["comm_s"] > 0 for r in rows)
    ps_rows = [r for r in rows if r["pattern"] == "ps"]
    assert all(r["comm_s"] == r["reduce_s"] + r["broadcast_s"] for r in ps_rows)


def test_a_sum_that_differs_from_the_exact_one_is_not_verified(monkeypatch, capsys):
    exact = gloo_peers.expected_sum
    monkeypatch.setattr(gloo_peers, "expected_sum", lambda *args: exact(*args) + 1)
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "lo")
    gloo_peers.main(["--name", "h1", "--data-ip", "127.0.0.1", "--rank", "0", "--world", "1",
                     "--workers", "1", "--master", "127.0.0.1:%d" % free_port(),
                     "--floats", "1000", "--rounds", "1", "--patterns", "allreduce"])
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["pattern"] == "allreduce" and row["verified"] is False


def test_integer_gradients_sum_exactly_in_float32_for_64_workers():
    total = gloo_peers.expected_sum(0, 64, 10_000)
    assert abs(total).max() <= 64 * gloo_peers.GRADIENT_MAGNITUDE < 2 ** 24
    assert (total.astype("float32").astype("float64") == total).all()
