"""Jobs for real on a 2x2 Mininet fabric under ryu-manager: the aggregator daemons serve
one job and then another, whole-number sums come back exact (workers on either data
path, daemons on the native one), a host outside the job
changes no sum, and its flood with a member's address reaches no daemon (the switch
drops and counts every datagram), DDP trains through fabric_hook with every rank identical, and a daemon
that dies fails the round within 5 s, naming its host (every DDP rank too, leaving
nothing), and has its job released once it has been silent for the job's lease time. A DDP run goes on through a controller killed and restarted, its lease kept;
one whose controller is away at its end (longer than the hosts keep a neighbour
without ARP, which the controller answers) trains on and leaves nothing once the
controller is back; one whose shard has no daemon fails at registration, naming the
host."""

import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from contextlib import contextmanager

import pytest

from experiments import api_fuzz
from experiments.traffic.gloo_peers import run_ranks
from experiments.traffic.jobs import (job_daemons, output_so_far, program_lines, run_job,
                                     start_workers, worker_lines)
from experiments.controller_process import wait_until
from syncfabric.hosts.transport.controller_client import ControllerHttpError
from syncfabric.openflow import builders as of
from syncfabric.openflow import steering_messages as steering
from syncfabric.services.job_daemons import SILENT_S
from tests.harness.testbeds import running_testbed

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16667, 18094
WORKERS = ["h1", "h2", "h3"]
MODEL_BYTES = 200_000
SERVERS = ["h4", "agg-spine1", "agg-spine2"]
LEASE_S = 3.0
INJECT = """
import socket, struct, sys, time
job, count, floats, targets = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
header = struct.Struct("!IIIIQ")
deadline = time.monotonic() + 20
while time.monotonic() < deadline:
    for target in targets:
        ip, port = target.split(":")
        for number in range(1, 4):
            for index in range(count):
                sock.sendto(header.pack(job, number, index, count, 1 << (index % 3))
                            + b"\\x47\\x00\\x00\\x00" * floats, (ip, int(port)))
    time.sleep(0.25)
"""

SPOOFED, SPOOF_RATE = 20_000, 1_000.0   # 1472-byte datagrams at 11.8 Mbit/s, on 20 Mbit/s links


@pytest.fixture(scope="module")
def bed():
    yield from running_testbed(api_fuzz.fuzz_topo(), OF_PORT, REST_PORT)


@pytest.fixture(scope="module")
def daemons(bed):
    with job_daemons(bed, SERVERS) as running:
        yield running
    failed = {host: daemon.log[daemon.log.index("Traceback") - 300:][:3000]
              for host, daemon in running.items() if "Traceback" in daemon.log}
    if failed:   # in full: an assertion's message is cut short
        pytest.fail("a daemon logged a traceback:\n" + "\n".join(
            "--- %s ---\n%s" % (host, excerpt) for host, excerpt in sorted(failed.items())))


def post_job(bed, **fields):
    return bed.client.request("POST", "/jobs", dict({"workers": WORKERS, "model_bytes": MODEL_BYTES},
                                                    **fields))


def test_rounds_through_the_daemons_are_exact_and_a_second_job_uses_the_same_daemons(bed, daemons):
    for fields in ({"placement": "dedicated", "shards": 1}, {"placement": "colocated"}):
        job = post_job(bed, **fields)
        try:
            results = run_job(bed, job, rounds=3, in_flight=2)
        finally:
            bed.client.request("DELETE", "/jobs/%d" % job["id"])
        assert {w: [r["exact"] for r in lines] for w, lines in results.items()} == \
            {w: [True] * 3 for w in WORKERS}
    assert all(daemon.poll() is None for daemon in daemons.values())
    assert bed.leftovers() == {}


@pytest.mark.parametrize("path", ["native", "python"])
def test_rounds_on_either_data_path_are_exact_and_leave_nothing(bed, daemons, path, monkeypatch):
    """The workers on `path`, the daemons on the native one (with python, a mixed job);
    OVS's userspace datapath refuses GSO (offloads off), so the native path sends without."""
    monkeypatch.setenv("SYNCFABRIC_DATAPATH", path)
    job = post_job(bed, placement="dedicated", shards=1)
    try:
        results = run_job(bed, job, rounds=3, in_flight=2)
    finally:
        bed.client.request("DELETE", "/jobs/%d" % job["id"])
    assert {(r["exact"], r["datapath"]) for lines in results.values() for r in lines} == {(True, path)}
    assert bed.leftovers() == {}


def test_fragments_from_a_host_outside_the_job_change_no_sum(bed, daemons):
    job = post_job(bed, placement="colocated")
    assert "h4" not in job["workers"]
    targets = ["%s:%d" % (s["address"], s["port"]) for s in job["shards"]] + \
        ["%s:%d" % (a["address"], a["port"]) for a in job["aggregators"]]
    injector = bed.popen("h4", [sys.executable, "-c", INJECT, str(job["id"]), str(job["fragments"]),
                                 str(job["fragment_bytes"] // 4), *targets])
    try:
        results = run_job(bed, job, rounds=3)
    finally:
        injector.kill()
        injector.wait()
        bed.client.request("DELETE", "/jobs/%d" % job["id"])
    assert all(r["exact"] for lines in results.values() for r in lines)
    assert bed.leftovers() == {}


def admission_drops(switch, job):
    """Packets the switch's table 0 dropped on the way to the job's plan."""
    flows = "table=0,cookie=%#x/-1" % steering.not_member_cookie(job["plan"])
    lines = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", switch, flows],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    return sum(int(re.search(r"n_packets=(\d+)", line).group(1)) for line in lines
               if "priority=%d" % of.PRIORITY_NOT_MEMBER in line)


def test_a_flood_with_a_members_address_from_outside_the_job_reaches_no_daemon(bed, daemons):
    job = post_job(bed, placement="colocated")
    assert "h4" not in job["workers"] and job["aggregators"]
    targets = ["%s:%d" % (a["address"], a["port"]) for a in job["aggregators"]]
    workers = start_workers(bed, job, rounds=30, start_at=time.time() + 1.0, every_s=1.0)
    flood = bed.popen("h4", [sys.executable, "-m", "experiments.traffic.spoof", "--source",
                             job["addresses"]["h1"], "--job", str(job["id"]), "--fragments",
                             str(job["fragments"]), "--pps", str(SPOOF_RATE), "--count",
                             str(SPOOFED), *targets], stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT, text=True)
    try:
        assert flood.communicate(timeout=SPOOFED / SPOOF_RATE + 30)[0].strip() == str(SPOOFED)
        counted = {}
        for name in {a["host"] for a in job["aggregators"]}:   # their counts while they serve
            daemons[name].send_signal(signal.SIGUSR1)
            counted[name] = re.findall(r"job %d \(generation \d+\): (\d+) datagrams taken, (\d+) "
                                       "dropped" % job["id"], output_so_far(daemons[name]))
        lines = program_lines(workers, job, timeout_s=60)
        (leaf,) = [h["switch"] for h in bed.client.get("/fabric/topology")["hosts"]
                   if h["name"] == "h4"]
        dropped_at_leaf = admission_drops(leaf, job)
        time.sleep(2.5)   # the controller reads the switches' drop counts every 2 s
        with urllib.request.urlopen(bed.client.base_url + "/metrics", timeout=10) as answer:
            metrics = answer.read().decode()
    finally:
        bed.client.request("DELETE", "/jobs/%d" % job["id"])
    assert all(r["exact"] for printed in lines.values() for r in printed[:-1])
    assert all(len(found) == 1 and found[0][1] == "0" and int(found[0][0]) > 0
               for found in counted.values()), counted   # each took the job's, no other
    assert dropped_at_leaf == SPOOFED
    counted_at_leaf = re.search(r'syncfabric_admission_drops_total\{switch="%s"\} ([\d.e+]+)'
                                % leaf, metrics)
    assert counted_at_leaf and float(counted_at_leaf.group(1)) >= SPOOFED
    assert bed.leftovers() == {}


@pytest.mark.parametrize("mode", ["fabric-stream", "fabric-colocated", "fabric-in-network"])
def test_ten_ddp_steps_through_the_hook_keep_every_rank_identical_and_leave_nothing(bed, daemons,
                                                                                   mode):
    rows = run_ranks(bed, WORKERS, "experiments.traffic.ddp_training",
                     ["--model", "tests.harness.ddp_ranks:tiny_digits", "--mode", mode,
                      "--steps", "10", "--controller", bed.management_url]
                     + ["--shards", "1"] * (mode == "fabric-stream"))
    assert [row["step"] for row in rows] == list(range(1, 11))
    assert all(row["ranks_identical"] for row in rows)
    assert all(stats["sent"] > 0 for row in rows for stats in row["rounds"])   # through the fabric
    assert rows[-1]["loss"] < rows[0]["loss"]
    assert bed.client.get("/jobs") == {"jobs": []}   # released at destroy_process_group
    assert bed.leftovers() == {}
    if mode == "fabric-in-network":   # its shards were the spines' aggregators
        admitted = [line for line in bed.controller_log().splitlines() if "shards on" in line]
        assert "shards on agg-spine" in admitted[-1]


def test_ten_ddp_steps_over_the_fabric_backend_keep_every_rank_identical_and_leave_nothing(
        bed, daemons):
    """DDP with no hook, its process group init_process_group("fabric"): the module's
    broadcast and every bucket go through the job's rounds."""
    rows = run_ranks(bed, WORKERS, "experiments.traffic.ddp_training",
                     ["--model", "tests.harness.ddp_ranks:tiny_digits", "--mode", "ddp-backend",
                      "--steps", "10", "--controller", bed.management_url, "--shards", "1",
                      "--min-bytes", "0"])   # its 10 KB of gradients too
    assert [row["step"] for row in rows] == list(range(1, 11))
    assert all(row["ranks_identical"] for row in rows)
    assert rows[0]["gloo_only"] is None, rows[0]["gloo_only"]
    calls = [row["fabric_calls"] for row in rows]
    assert calls[0] >= 1 and all(b > a for a, b in zip(calls, calls[1:]))   # every step's
    assert rows[-1]["loss"] < rows[0]["loss"]
    assert bed.client.get("/jobs") == {"jobs": []}   # released at destroy_process_group
    assert bed.leftovers() == {}


def test_ddp_over_the_fabric_backend_ends_bit_for_bit_as_over_gloo_and_leaves_nothing(
        bed, daemons):
    """DDP with no hook over init_process_group("fabric") and over Gloo, from the same
    parameters, on gradients that are whole-number sums (tests/harness/ddp_alike_ranks.py):
    alike bit for bit after 10 steps; an all-gather through the group's gather job and
    a reduce-scatter through its scatter job alike too; and nothing left after
    destroy_process_group."""
    rows = run_ranks(bed, WORKERS, "tests.harness.ddp_alike_ranks",
                     ["--controller", bed.management_url, "--steps", "10"])
    assert rows[0]["gloo_only"] is None, rows[0]["gloo_only"]
    assert rows[0]["gather_refused"] is None, rows[0]["gather_refused"]
    assert rows[0]["scatter_refused"] is None, rows[0]["scatter_refused"]
    assert rows[0]["alike"] is True and rows[0]["gathered_alike"] is True
    assert rows[0]["scattered_alike"] is True
    # the broadcast, every step's bucket, the all-gather and the reduce-scatter
    assert rows[0]["counts"]["fabric"] >= 12
    assert bed.client.get("/jobs") == {"jobs": []}
    assert bed.leftovers() == {}


def ddp_run(bed, steps, on_row):
    """A fabric-stream DDP run of tiny_digits with a short lease, on_row(row) at each step."""
    return run_ranks(bed, WORKERS, "experiments.traffic.ddp_training",
                     ["--model", "tests.harness.ddp_ranks:tiny_digits", "--mode", "fabric-stream",
                      "--steps", str(steps), "--controller", bed.management_url, "--shards", "1",
                      "--lease-s", str(LEASE_S)], on_row)


def jobs_answered(bed):
    """GET /jobs's jobs, or None while the controller is away or restoring them."""
    try:
        return bed.client.get("/jobs")["jobs"]
    except (OSError, ControllerHttpError):
        return None


def test_a_ddp_run_rides_out_a_controller_restart_and_keeps_its_lease(bed, daemons):
    # killed at step 3 and restarted a second later; the run (~30 ms a step) goes on for
    # more than two leases after, renewed by rank 0
    training, arrivals, back = threading.Event(), [], []

    def away_and_back():
        training.wait()
        bed.kill_controller()
        time.sleep(1.0)
        back.append(len(bed.controller_log()))
        bed.restart_controller()
        back.append(time.monotonic())
    restarter = threading.Thread(target=away_and_back)
    restarter.start()

    def at_step(row):
        arrivals.append(time.monotonic())
        if row["step"] == 3:
            training.set()
    try:
        rows = ddp_run(bed, 400, at_step)
    finally:
        training.set()
        restarter.join()
    log_from, back_at = back
    assert [row["step"] for row in rows] == list(range(1, 401))
    assert all(row["ranks_identical"] for row in rows)
    assert arrivals[-1] - back_at > 2 * LEASE_S   # outlived its lease: renewed
    log = bed.controller_log()[log_from:]
    assert " restored (generation 1)" in log and "lease expired" not in log
    assert "Traceback" not in bed.controller_log()
    assert jobs_answered(bed) == [] and bed.leftovers() == {}   # the hook's DELETE went through


@contextmanager
def neighbours_kept_briefly(bed, hosts):
    """The hosts' kernels hold a neighbour entry 0.25-0.75 s without a sign of life, then
    probe it after 1 s (their defaults: 15-45 s, then 5 s): a controller away for a few
    seconds outlives them, as one away for a minute outlives the defaults."""
    keys = {host: ["net.ipv4.neigh.%s.%s" % (bed.interface(host), name)
                   for name in ("base_reachable_time_ms", "delay_first_probe_time")]
            for host in hosts}
    before = {host: bed.host(host).cmd("sysctl -n " + " ".join(names)).split()
              for host, names in keys.items()}
    for host, (reachable, probe) in keys.items():
        bed.host(host).cmd("sysctl -qw %s=500 %s=1" % (reachable, probe))
    try:
        yield
    finally:
        for host, names in keys.items():
            bed.host(host).cmd("sysctl -qw " + " ".join(
                "%s=%s" % item for item in zip(names, before[host])))


def test_a_ddp_run_whose_controller_is_killed_trains_on_and_leaves_nothing_once_it_is_back(
        bed, daemons):
    # killed at step 3 and away until the ranks are done (longer than the hosts keep their
    # neighbours: the round's datagrams confirm them): the switches keep the job's flows,
    # the ranks cannot DELETE it; the restarted controller lets its lease run out
    with neighbours_kept_briefly(bed, WORKERS + SERVERS):
        rows = ddp_run(bed, 150, lambda row: row["step"] == 3 and bed.kill_controller())
    assert [row["step"] for row in rows] == list(range(1, 151))
    assert all(row["ranks_identical"] for row in rows)
    assert bed.leftovers()   # the job's trees and plan, still on the switches
    bed.restart_controller()
    wait_until(lambda: jobs_answered(bed) == [] and bed.leftovers() == {}, 3 * LEASE_S,
               "the job's lease to run out and its parts to go")
    log = bed.controller_log()
    assert "lease expired" in log and "Traceback" not in log


def test_a_daemon_that_dies_mid_round_fails_the_round_within_5_s_naming_its_host(bed, daemons):
    # h4's daemon does not come back (the next test starts its own, the last one none)
    job = post_job(bed, placement="dedicated", shards=1, aggregation=False)
    try:
        workers = start_workers(bed, job, rounds=400)
        time.sleep(2.0)   # rounds are under way
        daemons["h4"].kill()
        killed = time.monotonic()
        lines = {w: worker_lines(p, timeout_s=30) for w, p in workers.items()}
        failed_after = time.monotonic() - killed
    finally:
        bed.client.request("DELETE", "/jobs/%d" % job["id"])
    assert failed_after < 5.0
    for worker_output in lines.values():
        assert "h4 (shard 0's host)" in worker_output[-1]["error"], worker_output[-1]
    assert bed.leftovers() == {}


def test_a_ddp_run_whose_daemon_dies_fails_on_every_rank_and_leaves_nothing(bed, daemons):
    # after the test above: a fresh daemon in h4, killed while the ranks train
    with job_daemons(bed, ["h4"]) as mine:
        killer = threading.Timer(8.0, mine["h4"].kill)
        killer.start()
        with pytest.raises(RuntimeError) as failed:
            run_ranks(bed, WORKERS, "experiments.traffic.ddp_training",
                      ["--model", "tests.harness.ddp_ranks:tiny_digits", "--mode", "fabric-stream",
                       "--steps", "1000", "--controller", bed.management_url, "--shards", "1"])
        killer.cancel()
    message = str(failed.value)   # every rank failed, the round naming the dead daemon's host
    assert all("%s: " % worker in message for worker in WORKERS) and "h4 (shard 0's host)" in message
    assert bed.client.get("/jobs") == {"jobs": []}   # released as the ranks ended
    assert bed.leftovers() == {}


def test_a_job_whose_daemon_stops_polling_is_released_in_its_lease_time_saying_why(bed, daemons):
    # after the tests above: a fresh daemon in h4, polling, then killed; the job has no
    # lease, so the controller waits job_daemons.SILENT_S for it
    with job_daemons(bed, ["h4"]) as mine:
        job = post_job(bed, placement="dedicated", shards=1, aggregation=False)
        time.sleep(2.0)   # it polls every 0.5 s
        mine["h4"].kill()
        killed = time.monotonic()

        def released():
            try:
                bed.client.get("/jobs/%d" % job["id"])
            except ControllerHttpError as error:
                return error.status == 404 and error.body.get("released")
            return False
        wait_until(released, SILENT_S + 10, "the job of a silent daemon to be released")
    assert time.monotonic() - killed < SILENT_S + 5
    assert released() == "daemon on h4 stopped answering"
    assert bed.leftovers() == {}


def test_a_ddp_run_with_no_daemon_where_its_shard_is_fails_at_registration_naming_the_host(
        bed, daemons):
    # after the tests above: no daemon in h4
    started = time.monotonic()
    with pytest.raises(RuntimeError) as failed:
        run_ranks(bed, WORKERS, "experiments.traffic.ddp_training",
                  ["--model", "tests.harness.ddp_ranks:tiny_digits", "--mode", "fabric-stream",
                   "--steps", "5", "--controller", bed.management_url, "--shards", "1"])
    message = str(failed.value)
    assert "h4 (shard 0's host) did not answer for 10 s" in message, message
    assert "FabricHookError" in message and time.monotonic() - started < 40
    assert bed.client.get("/jobs") == {"jobs": []}   # released on every rank's say
    assert bed.leftovers() == {}
