"""A summing node on several cores (syncfabric/hosts/jobs/core_split.py), on loopback: the
kernel steers each datagram to the socket of its fragment's core and every control
message to core 0; the native sender never puts two blocks in one GSO run; a datagram
that reaches the wrong core is summed by its own; a repair request is answered by every
core for its own fragments; and a daemon with --cores 2 serves exact rounds, each core
taking its share."""

import socket
import threading
import time

import numpy as np
import pytest

from syncfabric.hosts.jobs.core_split import CoreShare, core_of, core_sockets
from syncfabric.hosts.datapath.native import NativeDatapath
from syncfabric.hosts.jobs.fabric_worker import FabricWorker
from syncfabric.hosts.packets.gradient_wire import HEADER, fragment_packet
from syncfabric.hosts.jobs.job_daemon import JobDaemon
from syncfabric.hosts.jobs.job_layout import JobLayout
from syncfabric.hosts.packets.control_messages import control_message, control_packet
from syncfabric.hosts.jobs.job_roles import ShardNode
from syncfabric.hosts.transport.receivers import datagrams, receiving_socket
from experiments.host_ranks import GivenJobs
from tests.harness.loopback_jobs import FRAGMENT_BYTES, address, assert_exact_rounds, one_tree

PS = "127.0.0.31"
PER_FRAGMENT = FRAGMENT_BYTES // 4
FRAGMENTS = 300   # blocks 0..4: core 0 of 2 sums 172 fragments, core 1 128


def waiting_indices(sock):
    """The fragment index of each datagram waiting on `sock` (b"SFJC" for a control
    message, None for one too short for a header)."""
    found = []
    for packet in datagrams(sock):
        if packet.startswith(b"SFJC"):
            found.append(b"SFJC")
        else:
            found.append(HEADER.unpack_from(packet)[2] if len(packet) >= HEADER.size else None)
    return found


@pytest.mark.parametrize("cores", [2, 3])
def test_the_kernel_steers_each_fragment_to_its_core_and_control_to_core_0(cores):
    sockets = core_sockets(PS, 29900 + cores, cores)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    indices = [0, 63, 64, 127, 128, 200, 1000]
    try:
        for index in indices:
            sender.sendto(HEADER.pack(1, 1, index, 2000, 1) + bytes(8), (PS, 29900 + cores))
        sender.sendto(control_packet({"job": 1, "hello": "w1"}), (PS, 29900 + cores))
        sender.sendto(b"ab", (PS, 29900 + cores))
        time.sleep(0.05)
        found = [waiting_indices(sock) for sock in sockets]
        assert found[0][-2:] == [b"SFJC", None]
        for core, indices_found in enumerate(found):
            assert [i for i in indices_found if isinstance(i, int)] == \
                [i for i in indices if core_of(i, cores) == core]
    finally:
        for sock in sockets + [sender]:
            sock.close()


def test_a_gso_run_never_spans_two_blocks():
    """60..75 in one send: a run may take 60..63, never 63..64, so core 1 gets 64..75."""
    sockets = core_sockets(PS, 29910, 2)
    for sock in sockets:
        NativeDatapath(gso=True).prepare_receiver(sock)
    path = NativeDatapath(gso=True)
    sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    values = np.arange(FRAGMENTS * PER_FRAGMENT, dtype=np.float32)
    indices = np.arange(60, 76)
    try:
        packets = path.fragments(1, 1, FRAGMENTS, indices, 1, values, indices * PER_FRAGMENT,
                                 PER_FRAGMENT, len(values))
        assert path.send(sender, packets, 0, len(indices), (PS, 29910)) == len(indices)
        time.sleep(0.05)
        assert [waiting_indices(sock) for sock in sockets] == [list(range(60, 64)),
                                                                list(range(64, 76))]
    finally:
        for sock in sockets + [sender]:
            sock.close()


def dedicated_job(job_id, workers, floats, port):
    """The POST /jobs answer for `workers` on loopback sending every fragment to one
    shard on PS, a host of its own."""
    count = -(-floats * 4 // FRAGMENT_BYTES)
    addresses = dict({w: address(i) for i, w in enumerate(workers)}, ps=PS)
    shard = {"host": "ps", "address": PS, "port": port, "fragments": [0, count],
             "bytes": [0, floats * 4],
             "return": one_tree(1, "239.78.%d.0" % job_id, port, 400.0, workers)}
    legs = {w: [{"shard": 0, "host": "ps", "address": PS, "port": port, "fragments": [0, count],
                 "rate_mbps": 400.0}] for w in workers}
    return {"id": job_id, "generation": 1, "release_key": "k", "workers": list(workers),
            "model_bytes": floats * 4, "fragment_bytes": FRAGMENT_BYTES, "fragments": count,
            "addresses": addresses, "shards": [shard], "destinations": legs, "aggregators": [],
            "predicted_round_s": 0.01, "lower_bound_s": 0.01}


@pytest.fixture
def core_nodes(each_datapath):
    """Core 0 and core 1 of a shard, each on a port of its own (no steering), handing
    off to each other at once; and a socket on the return group."""
    layout = JobLayout(dedicated_job(5, ["w1", "w2"], FRAGMENTS * PER_FRAGMENT, 29920))
    nodes = []

    def handoff(core, packet, source):
        nodes[core].datagram(packet, source)
    nodes += [ShardNode(layout, layout.shards[0], receiving_socket(PS, 29921 + core, reuse=False),
                        share=CoreShare(core, 2, handoff)) for core in range(2)]
    returned = receiving_socket("239.78.5.0", 29920, groups=["239.78.5.0"], data_ip=address(0))
    yield layout, nodes, returned
    for sock in [node.sock for node in nodes] + [returned]:
        sock.close()


def settle(nodes, seconds=0.1):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for node in nodes:
            node.take()
            node.sums_out.send_due()
        time.sleep(0.002)


def test_a_fragment_that_reaches_the_wrong_core_is_summed_by_its_own(core_nodes):
    layout, nodes, returned = core_nodes
    values = np.ones(FRAGMENTS * PER_FRAGMENT, dtype=np.float32)
    workers = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2)]
    for worker, sock in enumerate(workers):
        sock.bind((address(worker), 0))
        for index in (5, 70):   # core 0's and core 1's, both to core 0's socket
            sock.sendto(fragment_packet(5, 1, index, 1 << worker, values, PER_FRAGMENT),
                        (PS, 29921))
    settle(nodes)
    sums = {}
    for packet in datagrams(returned):
        _job, _round, index, _count, mask = HEADER.unpack_from(packet)
        sums[index] = mask
    assert sums == {5: 0b11, 70: 0b11}
    assert (nodes[0].rounds[1].have[[5, 70]] == [0b11, 0]).all()
    assert (nodes[1].rounds[1].have[[5, 70]] == [0, 0b11]).all()
    assert nodes[1].rounds[1].values_of(70).tolist() == [2.0] * PER_FRAGMENT
    for sock in workers:
        sock.close()


def test_a_core_holds_the_sums_of_its_own_blocks_only(core_nodes):
    """Its share's pages alone: two cores' arrays interleaved block by block would each
    touch (and the kernel clear) every huge page of the shard."""
    _layout, nodes, _returned = core_nodes
    sizes = [len(node.sums(1).sums) for node in nodes]
    assert sizes == [172 * PER_FRAGMENT, 128 * PER_FRAGMENT]
    assert nodes[1].sums(1).start_of(np.array([64, 127, 192])).tolist() == \
        [0, 63 * PER_FRAGMENT, 64 * PER_FRAGMENT]


def test_each_core_answers_a_repair_request_for_its_own_fragments(core_nodes):
    layout, nodes, returned = core_nodes
    values = np.ones(FRAGMENTS * PER_FRAGMENT, dtype=np.float32)
    worker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    worker.bind((address(0), 0))
    for index in (5, 70):
        worker.sendto(fragment_packet(5, 1, index, 0b01, values, PER_FRAGMENT),
                      (PS, 29921 + core_of(index, 2)))
    settle(nodes)
    worker.sendto(control_packet({"job": 5, "round": 1, "need": [[0, FRAGMENTS]]}), (PS, 29921))
    settle(nodes)
    answers = [control_message(packet) for packet in datagrams_from(worker)]
    assert sorted(len(answer["missing"]) for answer in answers) == [128, 172]
    missing = {index: mask for answer in answers for index, mask in answer["missing"]}
    assert set(missing) == set(range(FRAGMENTS)) and missing[5] == missing[70] == 0b10
    worker.close()


def datagrams_from(sock):
    sock.setblocking(False)
    found = []
    while True:
        try:
            found.append(sock.recv(65536))
        except BlockingIOError:
            return found


def test_a_daemon_on_two_cores_serves_exact_rounds_each_core_its_share(each_datapath):
    floats = FRAGMENTS * PER_FRAGMENT - 7
    report = dedicated_job(6, ["w1", "w2"], floats, 29930)
    daemon = JobDaemon(GivenJobs(report), "ps", cores=2)
    serving = threading.Thread(target=daemon.serve, daemon=True)
    serving.start()
    pair = [FabricWorker(report, name) for name in ("w1", "w2")]
    try:
        for worker in pair:
            worker.wait_served(timeout_s=10.0)
        assert_exact_rounds(pair, floats)
        taken = [loop.datagrams for loop in daemon.loops]
        assert taken[0] >= 3 * 2 * 172 and taken[1] >= 3 * 2 * 128   # each its blocks' share
        assert all(loop.cpu_s() > 0 for loop in daemon.loops)
        assert all(loop.thread.is_alive() for loop in daemon.loops)
    finally:
        for worker in pair:
            worker.close()
        daemon.stop()
        serving.join(timeout=10)
    assert not serving.is_alive()
