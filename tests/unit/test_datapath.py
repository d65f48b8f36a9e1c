"""The two data paths (syncfabric/hosts/datapath) on loopback: the native one builds
byte-identical datagrams and sums exactly what the Python one does, with GSO and GRO off
and on; a job of native and Python workers is exact; without the extension the hosts
fall back to Python with one warning; and summing nodes sum every round in the arrays
they made when they started."""

import logging
import select
import socket
import sys
import time

import numpy as np
import pytest

from experiments.fuzzing.differential import RecordingSocket, to_batch
from syncfabric.decisions.model_shards import fragment_payload_bytes
from syncfabric.hosts import datapath as datapaths
from syncfabric.hosts.jobs import job_roles
from syncfabric.hosts.datapath.native import NativeDatapath
from syncfabric.hosts.datapath.python import PythonDatapath
from syncfabric.hosts.jobs.fabric_worker import FabricWorker
from syncfabric.hosts.packets.gradient_wire import HEADER, fragment_packet
from syncfabric.hosts.jobs.job_layout import JobLayout
from syncfabric.hosts.packets.control_messages import control_packet
from syncfabric.hosts.jobs.job_roles import ShardNode
from syncfabric.hosts.transport.receivers import receiving_socket
from tests.harness.loopback_jobs import assert_exact_rounds, loopback_job
from tests.unit.test_job_roles import ADDRESS, PORT, report, sender

PATHS = {"python": PythonDatapath(), "native": NativeDatapath(gso=False),
         "native-gso": NativeDatapath(gso=True)}


def odd_values(floats, seed=0):
    return np.random.default_rng(seed).standard_normal(floats, dtype=np.float32)


@pytest.mark.parametrize("per_fragment,floats", [(362, 362 * 4), (7, 100), (2237, 2237 * 3 - 5)])
def test_both_paths_build_byte_identical_datagrams(per_fragment, floats):
    values = odd_values(floats)
    count = -(-floats // per_fragment)
    indices = np.arange(count)[::-1]          # any order, the short last one included
    masks = (np.arange(count) % 5 + 1).astype(np.uint64)
    starts = indices * per_fragment
    built = {name: path.fragments(7, 3, count, indices, masks, values, starts, per_fragment, floats)
             for name, path in PATHS.items()}
    expected = [fragment_packet(7, 3, int(i), int(m), values, per_fragment)[:HEADER.size + 4 * min(
        per_fragment, floats - int(i) * per_fragment)] for i, m in zip(indices, masks)]
    expected = [HEADER.pack(7, 3, int(i), count, int(m)) + packet[HEADER.size:]
                for i, m, packet in zip(indices, masks, expected)]
    for name, packets in built.items():
        assert [bytes(packets[i]) for i in range(len(packets))] == expected, name


@pytest.mark.parametrize("gso", [False, True])
def test_fragments_sent_from_the_callers_array_arrive_as_the_python_path_builds_them(gso):
    """The native path sends a fragment as its header and a piece of the caller's floats
    (two iovecs); with GSO, runs of them as one send, the short last fragment too. A GRO
    receiver gets the Python path's datagrams, byte for byte and in order."""
    per_fragment, floats = 2237, 2237 * 150 - 5
    values = odd_values(floats)
    count = -(-floats // per_fragment)
    indices = np.arange(count)
    masks = np.full(count, 0b10, dtype=np.uint64)
    path = NativeDatapath(gso)
    built = path.fragments(7, 3, count, indices, masks, values, indices * per_fragment,
                           per_fragment, floats)
    expected = PATHS["python"].fragments(7, 3, count, indices, masks, values,
                                         indices * per_fragment, per_fragment, floats)
    receiver = receiving_socket("127.0.0.32", 0, reuse=False)
    path.prepare_receiver(receiver)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out.bind(("127.0.0.12", 0))
    taken = []
    for first in range(0, count, 50):   # what a receive buffer holds, a batch at a time
        assert path.send(out, built, first, min(count, first + 50), receiver.getsockname()) \
            == min(count, first + 50) - first
        while len(taken) < min(count, first + 50) and select.select([receiver], [], [], 1)[0]:
            batch = path.receive(receiver)
            taken += [batch.packet(i) for i in range(batch.count)]
    assert taken == expected
    out.close()
    receiver.close()


def feed(node, packets_from):
    """Send each (worker, datagram) to the node from the worker's address; take them all."""
    socks = {}
    for name, packet in packets_from:
        sock = socks.setdefault(name, sender(name))
        sock.sendto(packet, (ADDRESS["ps"], PORT))
    deadline = time.monotonic() + 0.3
    while time.monotonic() < deadline:
        node.take()
        node.sums_out.send_due()
        time.sleep(0.005)
    for sock in socks.values():
        sock.close()


def traffic():
    """Three workers' fragments of rounds 1 and 2, with what a node must not count: a
    stranger, a worker speaking for another, another job, a short and a long datagram,
    repeats, a hello, and a round too old once 16 newer ones are kept."""
    values = {w: odd_values(362 * 4, seed=i) for i, w in enumerate(("w1", "w2", "w3"))}
    packets = []
    for number in (1, 2):
        for index in range(4):
            for i, w in enumerate(("w1", "w2", "w3")):
                packets.append((w, fragment_packet(7, number, index, 1 << i, values[w])))
            packets.append(("stranger", fragment_packet(7, number, index, 1, values["w1"])))
            packets.append(("w1", fragment_packet(7, number, index, 0b010, values["w2"])))
            packets.append(("w1", fragment_packet(8, number, index, 1, values["w1"])))
            packets.append(("w2", fragment_packet(7, number, index, 0b010, values["w2"])[:-4]))
            packets.append(("w2", fragment_packet(7, number, index, 0b010, values["w2"]) + b"x"))
            packets.append(("w3", fragment_packet(7, number, index, 0b100, values["w3"])))
    packets.append(("w1", control_packet({"job": 7, "hello": "w1"})))
    packets += [("w1", fragment_packet(7, number, 0, 1, values["w1"])) for number in range(3, 20)]
    packets.append(("w2", fragment_packet(7, 1, 0, 0b010, values["w2"])))   # round 1: forgotten
    return packets


def test_both_paths_sum_alike_and_refuse_alike():
    """The same datagrams to a shard's host on each path: the same sums, masks, drops,
    returns and answers."""
    outcome = {}
    for name, path in PATHS.items():
        layout = JobLayout(report())
        node = ShardNode(layout, layout.shards[0], receiving_socket(ADDRESS["ps"], PORT, reuse=False),
                         path=path)
        returned = []
        node.completed_all = lambda number, indices, returned=returned: returned.extend(
            (number, index) for index in indices)
        feed(node, traffic())
        node.sock.close()
        outcome[name] = ({n: (s.sums.tobytes(), s.have.tolist(), s.received_bytes)
                          for n, s in node.rounds.items()}, node.dropped, sorted(returned))
    assert outcome["native"] == outcome["python"] == outcome["native-gso"]
    sums, dropped, returned = outcome["python"]
    assert 1 not in sums and returned[:8] == [(1, i) for i in range(4)] + [(2, i) for i in range(4)]
    assert dropped == 8 * 5 + 1   # five refused per fragment, and round 1 once forgotten


def test_a_flood_of_rounds_outside_the_window_is_refused_in_c_and_counted_alike():
    """Fragments naming rounds past a node's window (a sender far ahead, or a hostile
    one): the native path refuses them in C, not one by one in the node's own rule as
    it did (15 us each), and counts them as the Python path does."""
    values, source = odd_values(362 * 4), (ADDRESS["w1"], 5000)
    flood = [(fragment_packet(7, 1, 0, 1, values), source)] + [
        (fragment_packet(7, 1000 + k, k % 4, 1, values), source) for k in range(40)]
    outcome = {}
    for name, path in PATHS.items():
        layout = JobLayout(report())
        node = ShardNode(layout, layout.shards[0], RecordingSocket(), path=path)
        handed, own_rule = [], node.datagram
        node.datagram = lambda packet, source, own_rule=own_rule, handed=handed: (
            handed.append(packet), own_rule(packet, source))
        node.absorb(to_batch(path, flood))
        outcome[name] = (node.dropped, node.out_of_window, list(node.rounds), len(handed))
    assert outcome["python"] == (40, 40, [1], 41)
    assert outcome["native"] == outcome["native-gso"] == (40, 40, [1], 1)   # round 1 opened


@pytest.mark.parametrize("gso", [False, True])
def test_a_burst_sent_in_one_call_arrives_whole_and_in_order(gso):
    """sendmmsg (and GSO: runs of equal datagrams, a shorter last one) to a GRO socket:
    the receive cuts the runs back into the same datagrams."""
    path = NativeDatapath(gso)
    receiver = receiving_socket("127.0.0.31", 0, reuse=False)
    path.prepare_receiver(receiver)
    packets = [bytes([k % 251]) * 8972 for k in range(150)] + [b"short" * 7, b"x"]
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out.bind(("127.0.0.11", 0))
    assert path.send(out, packets, 0, len(packets), receiver.getsockname()) == len(packets)
    taken = []
    while len(taken) < len(packets) and select.select([receiver], [], [], 1)[0]:
        batch = path.receive(receiver)
        taken += [(batch.packet(i), batch.source(i)) for i in range(batch.count)]
    assert [p for p, _source in taken] == packets
    assert {source for _p, source in taken} == {out.getsockname()}
    out.close()
    receiver.close()


def test_gso_refused_by_the_path_is_turned_off_for_that_socket(monkeypatch, caplog):
    path, calls = NativeDatapath(gso=True), []

    def refusing(fd, buffer, offsets, lengths, payload, payload_offsets, payload_lengths, first,
                 stop, address, port, gso):
        calls.append(gso)
        if gso:
            raise OSError(5, "Input/output error")   # EIO: the device cannot segment
        return stop - first
    monkeypatch.setattr("syncfabric.hosts.datapath.native._native.send_batch", refusing)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with caplog.at_level(logging.INFO, logger="syncfabric.hosts"):
        assert path.send(sock, [b"a" * 100] * 3, 0, 3, ("127.0.0.1", 9)) == 3
        assert path.send(sock, [b"a" * 100] * 3, 0, 3, ("127.0.0.1", 9)) == 3
    assert calls == [True, False, False] and "sending without it" in caplog.text
    sock.close()


@pytest.mark.parametrize("first,second", [("native", "python"), ("python", "native")])
def test_a_job_of_native_and_python_workers_is_exact(first, second):
    """Each worker holds a shard: native sums Python's fragments and the reverse."""
    floats = 362 * 300 + 17
    job = loopback_job(93, ["w1", "w2"], floats * 4, 29760)
    pair = [FabricWorker(job, "w1", path=PATHS[first]), FabricWorker(job, "w2", path=PATHS[second])]
    try:
        assert_exact_rounds(pair, floats)
    finally:
        for worker in pair:
            worker.close()


@pytest.mark.parametrize("name", PATHS)
def test_a_job_of_64_kb_datagrams_is_exact_on_every_path(name):
    """Bigger units where loopback and veth allow them: fragments that fill a 65535-byte
    MTU, each the most a UDP datagram holds, summed and returned exactly (host_allreduce
    --mtus measures them)."""
    fragment_bytes = fragment_payload_bytes(65535)
    assert fragment_bytes + HEADER.size <= 65507 < fragment_bytes + 4 + HEADER.size
    floats = fragment_bytes // 4 * 9 + 17   # 10 fragments, the last short
    job = loopback_job(94, ["w1", "w2"], floats * 4, 29770, fragment_bytes=fragment_bytes)
    pair = [FabricWorker(job, worker, path=PATHS[name]) for worker in ("w1", "w2")]
    try:
        assert pair[0].layout.per_fragment == fragment_bytes // 4
        assert_exact_rounds(pair, floats)
    finally:
        for worker in pair:
            worker.close()


@pytest.mark.parametrize("name", PATHS)
def test_sums_returned_by_unicast_reach_every_worker_on_its_own_tree_on_every_path(name):
    """A job whose shards return a copy of each sum to each worker alone (the papers'
    baseline): each worker hears only its own tree's group, so every sum exact means every
    copy arrived."""
    workers = ["w1", "w2", "w3"]
    job = loopback_job(95, workers, 4 * 1448 * 9, 29790, returns="unicast")
    team = [FabricWorker(job, worker, path=PATHS[name]) for worker in workers]
    try:
        assert [len(shard.returns) for shard in team[0].layout.shards] == [2, 2, 2]
        assert team[0].layout.shards[1].group_of("w1") == "239.101.95.0"
        assert_exact_rounds(team, 1448 * 9)
    finally:
        for worker in team:
            worker.close()


def test_without_the_extension_the_hosts_run_python_with_one_warning(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "syncfabric.hosts.datapath._native", None)   # not built
    monkeypatch.delenv(datapaths.DATAPATH_ENV, raising=False)
    datapaths._datapath.cache_clear()
    try:
        assert not datapaths.native_built()
        with caplog.at_level(logging.WARNING, logger="syncfabric.hosts"):
            assert datapaths.datapath().name == "python"
            assert datapaths.datapath().name == "python"
        assert caplog.text.count("the native data path is not built here") == 1
        with pytest.raises(ValueError, match="choose one of native, python"):
            datapaths.datapath("fast")
    finally:
        datapaths._datapath.cache_clear()


def test_the_environment_chooses_the_path(monkeypatch):
    monkeypatch.setenv(datapaths.DATAPATH_ENV, "python")
    assert datapaths.datapath().name == "python"
    monkeypatch.setenv(datapaths.DATAPATH_ENV, "native")
    monkeypatch.setenv(datapaths.GSO_ENV, "off")
    assert datapaths.datapath().name == "native" and not datapaths.datapath().gso
    monkeypatch.setenv(datapaths.GSO_ENV, "maybe")
    with pytest.raises(ValueError, match="say on or off"):
        datapaths.datapath()


def test_a_large_shards_host_keeps_few_rounds_and_sums_new_ones_in_their_arrays(monkeypatch):
    """With room for 4 rounds only, round 5 is summed in round 1's array, which held other
    sums: a fragment's first datagram is copied in, so the sums are still exact. Every
    round's array is one the node made when it started."""
    monkeypatch.setattr(job_roles, "KEPT_BYTES", 1)
    for path in PATHS.values():
        layout = JobLayout(report())
        node = ShardNode(layout, layout.shards[0], receiving_socket(ADDRESS["ps"], PORT, reuse=False),
                         path=path)
        assert node.kept == job_roles.FEWEST_KEPT_ROUNDS
        made = {id(array) for array in node.spare_sums}
        arrays = []
        for number in range(1, 7):
            feed(node, [(w, fragment_packet(7, number, index, 1 << i, np.full(362 * 4, number + i,
                                                                                dtype=np.float32)))
                        for index in range(4) for i, w in enumerate(("w1", "w2", "w3"))])
            arrays.append(node.rounds[number].sums)
            assert np.array_equal(node.rounds[number].total(), np.full(362 * 4, 3 * number + 3))
        node.sock.close()
        assert sorted(node.rounds) == [3, 4, 5, 6]
        assert arrays[4] is arrays[0] and arrays[5] is arrays[1], path.name
        assert {id(array) for array in arrays} == made, path.name
