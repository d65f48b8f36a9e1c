"""What any local process can send a summing node or a worker, on both data paths
(each_datapath): GRO datagrams of the kernel's most segments, rounds far ahead or past
the wire's 32 bits, and answers to repair requests that no shard sent; and job
descriptions whose fragment count or ranges disagree with the model. Each reproduces a
report of the hostile-datagrams issue; after each, the sums of the rounds that follow
are exact, and the daemon's counts say what was dropped."""

import json
import logging
import socket

import numpy as np
import pytest

from syncfabric.hosts.datapath.python import BATCH
from syncfabric.hosts.jobs.fabric_worker import FabricWorker
from syncfabric.hosts.packets.gradient_wire import ROUND_MAX, fragment_packet
from syncfabric.hosts.jobs.job_daemon import JobDaemon, counts
from syncfabric.hosts.jobs.job_layout import JobError, JobLayout
from syncfabric.hosts.packets.control_messages import control_packet
from syncfabric.hosts.jobs.job_roles import KEPT_ROUNDS
from syncfabric.hosts.jobs.round_window import RoundWindow
from tests.harness.loopback_jobs import loopback_job
from tests.unit.test_job_roles import ADDRESS, PORT, report, returned_sums, sender, settle, values
from tests.unit.test_job_roles import shard  # noqa: F401  (the fixture these tests use)

pytestmark = pytest.mark.usefixtures("each_datapath")

UDP_SEGMENT = 103


def send_round(number, to=(ADDRESS["ps"], PORT)):
    """Every worker's four fragments of round `number`: their sums are 6.0 each."""
    for worker, name in enumerate(("w1", "w2", "w3")):
        sock = sender(name)
        for index in range(4):
            sock.sendto(fragment_packet(7, number, index, 1 << worker, values(worker)), to)
        sock.close()


def test_eight_gro_datagrams_of_128_segments_fit_and_the_next_round_is_exact(shard):
    """Eight sends of 128 one-byte segments each (UDP_SEGMENT 1): loopback hands a GRO
    receiver each whole. The native path's arrays held 512 segments and took 516."""
    layout, node, returned = shard
    hostile = sender("w1")   # any process on a member's host
    sent = 0
    for _ in range(8):
        try:
            hostile.sendmsg([b"x" * 128], [(socket.IPPROTO_UDP, UDP_SEGMENT, (1).to_bytes(2, "little"))],
                            0, (ADDRESS["ps"], PORT))
            sent += 128
        except OSError:   # a kernel before 6.10 takes 64 segments at most
            pytest.skip("this kernel refuses 128 segments in one send")
    hostile.close()
    batch = node.path.receive(node.sock)
    capacity = len(batch.offsets) if node.path.name == "native" else BATCH   # segments it holds
    assert 0 < batch.count <= capacity
    node.absorb(batch)
    settle(node)
    assert 0 < node.taken == node.dropped <= sent   # none is a fragment (a capped buffer drops some)
    send_round(1)
    settle(node)
    assert returned_sums(returned) == {(1, i): (0b111, 6.0) for i in range(4)}


def hostile_requests(rounds):
    w1 = sender("w1")
    for number in rounds:
        w1.sendto(b"SFJC" + json.dumps({"job": 7, "round": number, "need": []}).encode(),
                  (ADDRESS["ps"], PORT))
    w1.close()


@pytest.mark.parametrize("first", [0, 1])
def test_rounds_past_32_bits_are_dropped_and_never_kept(shard, first):
    """A repair request for round 2**32 + 1 made the native path sum round 1 into it; 16
    of them made both paths forget every real round."""
    layout, node, returned = shard
    if first:
        send_round(1)
        settle(node)
    hostile_requests([2 ** 32 + 1] + [2 ** 32 + k for k in range(2, 18)])
    settle(node)
    assert max(node.rounds, default=0) <= ROUND_MAX and node.out_of_window == 17
    assert "17 dropped as not the job's (17 naming a round outside the window)" in counts([[node]])
    send_round(1 + first)
    settle(node)
    assert returned_sums(returned) == {(n, i): (0b111, 6.0) for n in range(1, 2 + first)
                                       for i in range(4)}


def test_rounds_far_ahead_of_the_newest_are_dropped_and_never_kept(shard):
    layout, node, returned = shard
    send_round(1)
    settle(node)
    hostile_requests([1 + KEPT_ROUNDS + k for k in range(1, 17)] + [ROUND_MAX])
    w1 = sender("w1")
    for number in (1000, ROUND_MAX):   # fragments too
        w1.sendto(fragment_packet(7, number, 0, 1, values(9)), (ADDRESS["ps"], PORT))
    w1.close()
    settle(node)
    assert sorted(node.rounds) == [1] and node.out_of_window == 19
    send_round(2)
    settle(node)
    assert returned_sums(returned) == {(n, i): (0b111, 6.0) for n in (1, 2) for i in range(4)}


def test_the_window_admits_whole_32_bit_rounds_near_the_newest_only():
    window = RoundWindow(kept=4, ahead=16)
    assert not any(window.admits(x) for x in (-1, ROUND_MAX + 1, True, 1.0, "1", None, [1]))
    assert window.admits(ROUND_MAX) and window.admits(0)   # the first may be any
    window.begin(100)
    assert [n for n in (96, 97, 100, 116, 117) if window.admits(n)] == [97, 100, 116]
    window.begin(50)   # an older round opened does not move the window back
    assert window.newest == 100


def test_a_repair_request_naming_no_round_is_dropped(shard):
    layout, node, returned = shard
    w1 = sender("w1")
    for message in ({"job": 7, "round": True, "need": []}, {"job": 7, "round": [1], "need": []},
                    {"job": 7, "need": []}):
        w1.sendto(control_packet(message), (ADDRESS["ps"], PORT))
    w1.close()
    settle(node)
    assert not node.rounds and node.dropped == 3


def test_answers_no_shard_sent_change_nothing_and_the_round_is_exact():
    """Answers to repair requests from a stranger, and malformed ones from the shard's
    own address: a round, shard or missing list that is not one used to raise in the
    worker's thread and fail its rounds."""
    floats = 362 * 20
    report = loopback_job(91, ["w1", "w2"], floats * 4, 29960)
    pair = [FabricWorker(report, name) for name in ("w1", "w2")]
    try:
        future = pair[0].allreduce_async(np.ones(floats, dtype=np.float32))
        hostile = {"127.0.0.50": socket.socket(socket.AF_INET, socket.SOCK_DGRAM),
                   "127.0.0.12": socket.socket(socket.AF_INET, socket.SOCK_DGRAM)}
        for source, sock in hostile.items():
            sock.bind((source, 0))
            for answer in ({"job": 91, "round": [0], "shard": 1, "missing": []},
                           {"job": 91, "round": 0, "shard": [1], "missing": [[0, 1]]},
                           {"job": 91, "round": 0, "shard": 1, "missing": [[2 ** 70, 1], "x", [1]]},
                           {"job": 91, "round": 0, "shard": 1, "missing": "all"}):
                sock.sendto(control_packet(answer), pair[0].sock.getsockname())
            sock.close()
        total = pair[1].allreduce(np.full(floats, 2.0, dtype=np.float32), timeout=10)
        assert np.array_equal(future.result(timeout=10), np.full(floats, 3.0)) and total[0] == 3.0
        assert pair[0].failure is None
    finally:
        for worker in pair:
            worker.close()


@pytest.mark.parametrize("fragments", [3, 5])
def test_a_job_whose_fragment_count_disagrees_with_its_model_is_refused_everywhere(fragments, caplog):
    """Four fragments carry the model; a report of 3 or 5 made the native path raise on
    every batch, or count a bare header as a returned sum."""
    wrong = dict(report(), fragments=fragments)
    with pytest.raises(JobError, match="%d fragments of 1448 bytes cannot carry a model of "
                                       "5792 bytes \\(4 do\\)" % fragments):
        JobLayout(wrong)
    with pytest.raises(JobError, match="cannot carry"):
        FabricWorker(wrong, "w1")
    daemon = JobDaemon(None, "ps")
    with caplog.at_level(logging.ERROR, logger="syncfabric.aggregator"):
        daemon.follow([wrong])
    assert not daemon.served and "job 7 cannot be served" in caplog.text


def test_a_job_whose_ranges_lie_outside_its_fragments_is_refused():
    wrong = report()
    wrong["destinations"]["w1"][0]["fragments"] = [0, 9]
    with pytest.raises(JobError, match="fragments 0..9 lie outside its 4"):
        JobLayout(wrong)


@pytest.mark.parametrize("receivers", [["w1", "w2"], ["w1", "w2", "w3", "w3"],
                                       ["w1", "w2", "w3", "x"]])
def test_a_job_whose_return_trees_miss_or_repeat_a_worker_is_refused(receivers):
    """A worker no return tree reaches would wait for its sums forever."""
    wrong = report()
    wrong["shards"][0]["return"]["trees"][0]["receivers"] = receivers
    with pytest.raises(JobError, match="shard 0's return trees reach"):
        JobLayout(wrong)
