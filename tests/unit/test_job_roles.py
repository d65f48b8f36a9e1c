"""A job's summing nodes on loopback addresses (127.0.0.x are all this host's): a shard
returns each sum once it holds every worker, answers repair requests, and never lets a
host outside the job, or a worker speaking for another, change a sum; an aggregator
sends its aggregate on, and again when a worker repeats a fragment."""

import os
import socket
import time

import numpy as np
import pytest

from syncfabric.hosts.datapath import datapath
from syncfabric.hosts.packets.gradient_wire import FLOATS as WIRE_FLOATS, HEADER, fragment_packet
from syncfabric.hosts.jobs.job_layout import JobError, JobLayout, striped_order
from syncfabric.hosts.packets.control_messages import control_message, control_packet
from syncfabric.hosts.jobs.round_stalls import ROUND_FAIL_S, round_fail_s
from syncfabric.hosts.jobs.job_roles import AggregatorNode, ShardNode
from syncfabric.hosts.transport.paced_sender import PacedSender, next_due, packets_by_round
from syncfabric.hosts.transport.pacing import SEND_AHEAD_S
from syncfabric.hosts.transport.receivers import datagrams, receiving_socket
from syncfabric.hosts.jobs.warm_arrays import RoundArrays
from syncfabric.hosts.jobs.worker_rounds import ReturnedSums, Round, RoundFilling
from tests.harness.loopback_jobs import one_tree

pytestmark = pytest.mark.usefixtures("each_datapath")   # both data paths

# one port per xdist worker: test_datapath and test_hostile_datagrams bind it too, and may
# run beside this file
PORT = 29000 + int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:])
FLOATS = 362 * 4   # four fragments
ADDRESS = {"w1": "127.0.0.11", "w2": "127.0.0.12", "w3": "127.0.0.13", "agg": "127.0.0.21",
           "ps": "127.0.0.31", "stranger": "127.0.0.50"}
GROUP = "127.0.0.41"   # stands in for the tree's multicast address


def report(aggregated=False):
    """w1, w2 and w3 send all four fragments to ps (w1 and w2 through agg if aggregated)."""
    via = "agg" if aggregated else "ps"
    to = {"w1": via, "w2": via, "w3": "ps"}
    legs = {w: [{"shard": 0, "host": to[w], "address": ADDRESS[to[w]], "port": PORT,
                 "fragments": [0, 4], "rate_mbps": 100.0}] for w in to}
    return {"id": 7, "generation": 1, "workers": ["w1", "w2", "w3"], "model_bytes": FLOATS * 4,
            "fragment_bytes": 1448, "fragments": 4, "addresses": ADDRESS,
            "shards": [{"host": "ps", "address": ADDRESS["ps"], "port": PORT, "fragments": [0, 4],
                        "bytes": [0, FLOATS * 4],
                        "return": one_tree(1, GROUP, PORT, 100.0, ["w1", "w2", "w3"])}],
            "destinations": legs,
            "aggregators": [{"host": "agg", "address": ADDRESS["agg"], "shard": 0, "port": PORT,
                             "rate_mbps": 100.0, "workers": {"w1": [0, 4], "w2": [0, 4]}}]
            if aggregated else []}


def sender(name):
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((ADDRESS[name], 0))
    return sock


def values(worker):
    return np.full(FLOATS, float(worker + 1), dtype=np.float32)


@pytest.fixture
def shard():
    layout = JobLayout(report())
    node = ShardNode(layout, layout.shards[0], receiving_socket(ADDRESS["ps"], PORT, reuse=False))
    returned = receiving_socket(GROUP, PORT, reuse=False)
    yield layout, node, returned
    node.sock.close()
    returned.close()


def settle(node, seconds=0.05):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        node.take()
        node.sums_out.send_due()
        time.sleep(0.002)


def returned_sums(sock):
    """What came back on `sock`, read as the hosts read it (a GRO run cut apart)."""
    sums = {}
    for packet in datagrams(sock):
        _job, number, index, _count, mask = HEADER.unpack_from(packet)
        sums[number, index] = (mask, np.frombuffer(packet, dtype=WIRE_FLOATS, offset=HEADER.size)[0])
    return sums


def test_a_shard_returns_each_sum_once_every_worker_is_in_it_and_strangers_change_nothing(shard):
    layout, node, returned = shard
    w1, w2, w3, stranger = (sender(n) for n in ("w1", "w2", "w3", "stranger"))
    for index in range(4):
        stranger.sendto(fragment_packet(7, 1, index, 0b001, values(9)), (ADDRESS["ps"], PORT))
        w1.sendto(fragment_packet(7, 1, index, 0b011, values(9)), (ADDRESS["ps"], PORT))  # w2's bit too
        w1.sendto(fragment_packet(8, 1, index, 0b001, values(9)), (ADDRESS["ps"], PORT))  # another job
    for sock, worker in ((w1, 0), (w2, 1)):
        for index in range(4):
            sock.sendto(fragment_packet(7, 1, index, 1 << worker, values(worker)), (ADDRESS["ps"], PORT))
    settle(node)
    assert returned_sums(returned) == {} and node.dropped == 12
    for index in range(4):
        w3.sendto(fragment_packet(7, 1, index, 0b100, values(2)), (ADDRESS["ps"], PORT))
    settle(node)
    assert returned_sums(returned) == {(1, i): (0b111, 6.0) for i in range(4)}


def test_a_fragment_of_the_wrong_length_changes_no_sum(shard):
    """One float too many would spill into the next fragment's place; one too few would
    leave a hole counted as summed: both are dropped, and the sums stay exact."""
    layout, node, returned = shard
    w1, w2, w3 = (sender(n) for n in ("w1", "w2", "w3"))
    spill = HEADER.pack(7, 1, 0, 4, 0b001) + np.full(363, 100.0, dtype=WIRE_FLOATS).tobytes()
    hole = HEADER.pack(7, 1, 1, 4, 0b001) + np.full(361, 100.0, dtype=WIRE_FLOATS).tobytes()
    for packet in (spill, hole):
        w1.sendto(packet, (ADDRESS["ps"], PORT))
    settle(node)
    assert node.dropped == 2
    for sock, worker in ((w1, 0), (w2, 1), (w3, 2)):
        for index in range(4):
            sock.sendto(fragment_packet(7, 1, index, 1 << worker, values(worker)), (ADDRESS["ps"], PORT))
    settle(node)
    assert returned_sums(returned) == {(1, i): (0b111, 6.0) for i in range(4)}
    assert np.all(node.rounds[1].total() == 6.0)


def test_values_given_in_pieces_go_into_an_array_used_again_once_its_round_is_gone():
    layout = JobLayout(report())
    pieces = RoundArrays(FLOATS)
    first = Round(1, layout, pieces=pieces)
    first.contribute(0, values(0)[:362], None, [0])
    first.contribute(362, values(1)[362:], None, [1, 2, 3])
    assert first.values is pieces.arrays[0]
    assert first.values[0] == 1.0 and first.values[-1] == 2.0
    held = first.values
    second = Round(2, layout, pieces=pieces)
    second.contribute(0, values(2)[:362], None, [0])
    assert second.values is not held   # the first round's is still held
    del first, held
    third = Round(3, layout, pieces=pieces)
    third.contribute(0, values(2)[:362], None, [0])
    assert third.values is pieces.arrays[0]


def test_a_round_given_whole_is_complete_at_once_and_pieces_fill_the_next():
    filling = RoundFilling(JobLayout(report()))
    assert filling.take(0, FLOATS) == (1, [0, 1, 2, 3], True)
    assert filling.filling is None   # nothing kept of a round given whole
    assert filling.take(0, 500) == (2, [0], False)
    with pytest.raises(ValueError, match="were given already"):
        filling.take(0, FLOATS)
    assert filling.take(500, FLOATS) == (2, [1, 2, 3], True)
    assert filling.take(0, FLOATS) == (3, [0, 1, 2, 3], True)


def test_a_worker_takes_back_only_sums_of_the_right_length():
    layout = JobLayout(report())
    current = Round(1, layout)
    returned = ReturnedSums(layout, layout.shards[0], receiving_socket(GROUP, PORT, reuse=False),
                            {1: current})
    ps = sender("ps")
    whole = np.full(362, 6.0, dtype=WIRE_FLOATS)
    ps.sendto(HEADER.pack(7, 1, 0, 4, 0b111) + whole.tobytes() + b"\0\0\0\0", (GROUP, PORT))
    ps.sendto(HEADER.pack(7, 1, 1, 4, 0b111) + whole[1:].tobytes(), (GROUP, PORT))
    ps.sendto(HEADER.pack(7, 1, 2, 4, 0b111) + whole.tobytes(), (GROUP, PORT))
    time.sleep(0.05)
    returned.take()
    returned.sock.close()
    assert current.have.tolist() == [False, False, True, False]


def test_a_shard_answers_a_repair_request_with_its_sums_or_who_it_misses(shard):
    layout, node, returned = shard
    w1, w2, w3 = (sender(n) for n in ("w1", "w2", "w3"))
    for sock, worker in ((w1, 0), (w2, 1), (w3, 2)):
        for index in range(3 if worker == 2 else 4):   # w3's fragment 3 is lost
            sock.sendto(fragment_packet(7, 1, index, 1 << worker, values(worker)), (ADDRESS["ps"], PORT))
    settle(node)
    assert set(returned_sums(returned)) == {(1, 0), (1, 1), (1, 2)}
    w1.sendto(control_packet({"job": 7, "round": 1, "need": [[1, 2], [3, 4]]}), (ADDRESS["ps"], PORT))
    settle(node)
    assert set(returned_sums(returned)) == {(1, 1)}   # the sum it holds, again
    w1.setblocking(False)
    assert control_message(w1.recv(65536)) == {"job": 7, "round": 1, "shard": 0,
                                               "missing": [[3, 0b100]]}


def test_an_aggregator_sends_its_aggregate_on_and_again_when_a_worker_repeats():
    layout = JobLayout(report(aggregated=True))
    node = AggregatorNode(layout, layout.aggregations[0],
                          receiving_socket(ADDRESS["agg"], PORT, reuse=False))
    ps = receiving_socket(ADDRESS["ps"], PORT, reuse=False)
    try:
        assert layout.shard_senders(layout.shards[0]) == {ADDRESS["agg"]: 0b011, ADDRESS["w3"]: 0b100}
        w1, w2 = sender("w1"), sender("w2")
        w1.sendto(fragment_packet(7, 1, 0, 0b001, values(0)), (ADDRESS["agg"], PORT))
        w2.sendto(fragment_packet(7, 1, 0, 0b010, values(1)), (ADDRESS["agg"], PORT))
        time.sleep(0.02)
        node.take()
        assert node.sums_out.wait() is not None     # paced: it leaves when it is due
        settle(node)
        assert returned_sums(ps) == {(1, 0): (0b011, 3.0)}
        # both workers repeat it before it leaves again: it leaves once
        w1.sendto(fragment_packet(7, 1, 0, 0b001, values(0)), (ADDRESS["agg"], PORT))
        w2.sendto(fragment_packet(7, 1, 0, 0b010, values(1)), (ADDRESS["agg"], PORT))
        time.sleep(0.02)
        node.take()
        assert len(node.sums_out.repair_queue) == 1 and not node.sums_out.queue
        settle(node)
        assert returned_sums(ps) == {(1, 0): (0b011, 3.0)}
    finally:
        node.sock.close()
        ps.close()


def test_values_in_pieces_spread_over_every_leg_of_every_shard_from_the_first_piece():
    # two shards of 6 fragments, each over two legs (aggregators) of 3
    order = striped_order([(0, 6), (6, 12), (0, 3), (3, 6), (6, 9), (9, 12)], 12)
    assert sorted(order) == list(range(12)) and order[-1] == 11   # the short last stays last
    assert sorted(order[:4]) == [0, 3, 6, 9]   # a third of the round: one fragment of each leg


def test_a_host_refuses_a_job_it_cannot_frame():
    with pytest.raises(JobError, match="fragments of 1001 bytes"):
        JobLayout(dict(report(), fragment_bytes=1001))
    with pytest.raises(JobError, match="multiple of 4"):
        JobLayout(dict(report(), model_bytes=10))


class RecordingSocket:
    def __init__(self):
        self.sent, self.flags = [], set()

    def sendto(self, packet, flags, _address):
        self.sent.append(len(packet))
        self.flags.add(flags)


def paced(sock, packet_of):
    """A PacedSender of packet_of(key) (None: not wanted) over the Python data path, which
    calls sock.sendto (the pacing is the same on both paths)."""
    def packets_of(keys):
        wanted = [key for key in keys if packet_of(key) is not None]
        return wanted, [packet_of(key) for key in wanted]
    return PacedSender(sock, packets_of, 1000, datapath("python"))


def test_returns_are_paced_at_the_trees_rate_and_each_sent_once_per_push():
    sock = RecordingSocket()
    sender = paced(sock, lambda key: None if key == 4 else bytes(1000))
    started = time.perf_counter()
    sender.push([0, 1, 2, 3, 0, 4], ("127.0.0.1", 9), 1.0)   # queued twice: sent once
    #                                                        4: no longer wanted, skipped
    sender.send_due()
    wait = sender.wait()
    away = time.perf_counter() - started   # what a loaded machine took from the test
    # 1042 bytes at 1 Mbit/s; it wakes SEND_AHEAD_S before the next is due
    assert len(sock.sent) == 1 and 0.007 < wait + SEND_AHEAD_S + away
    assert wait + SEND_AHEAD_S < 0.0085
    while sender.wait() is not None:
        time.sleep(sender.wait())
        sender.send_due()
    assert len(sock.sent) == 4
    assert sock.flags == {socket.MSG_CONFIRM}   # the kernel keeps the neighbour without ARP


def test_a_sender_awake_sends_the_returns_due_within_send_ahead_s():
    sock = RecordingSocket()
    sender = paced(sock, lambda key: bytes(1000))
    sender.push(list(range(8)), ("127.0.0.1", 9), 1042 * 8 / 0.0025 / 1e6)   # one per 2.5 ms
    sender.send_due()
    assert len(sock.sent) == 2    # due now and in 2.5 ms
    started = time.perf_counter()
    while sender.wait() is not None:
        time.sleep(sender.wait())
        sender.send_due()
    assert len(sock.sent) == 8 and time.perf_counter() - started >= 5 * 0.0025


def test_repairs_go_ahead_of_the_first_passes_queued_a_few_of_them_apart():
    sock = RecordingSocket()
    sender = paced(sock, lambda key: bytes(100 + key))   # its length names the key
    address = ("127.0.0.1", 9)
    sender.push(list(range(10)), address, 1000.0)
    sender.push([20], address, 1000.0, repair=True)
    sender.push([21, 2, 22], address, 1000.0, repair=True)   # 2 waits as a first pass
    while sender.wait() is not None:
        time.sleep(sender.wait())
        sender.send_due()
    assert [length - 100 for length in sock.sent] == [20, 0, 1, 2, 21, 3, 4, 5, 22, 6, 7, 8, 9]
    sender.push([30, 31], address, 1000.0, repair=True)   # no first pass waits: all at once
    sender.send_due()
    assert [length - 100 for length in sock.sent[13:]] == [30, 31]


def test_a_worker_asks_a_shard_held_elsewhere_for_what_has_not_come_back():
    layout = JobLayout(report())
    current = Round(1, layout)
    current.contribute(0, np.zeros(layout.floats, dtype=np.float32), None,
                       list(range(layout.count)))   # given whole
    current.place(1, np.zeros(362, dtype=np.float32))
    [(packet, address)] = current.repair_requests("w1", 12.5)
    assert address == (ADDRESS["ps"], PORT)
    assert control_message(packet) == {"job": 7, "round": 1, "need": [[0, 1], [2, 4]]}
    assert current.asked_at == 12.5 and current.stats["repair_requests"] == 1
    assert current.repair_requests("ps", 13.0) == []   # its own shard: read in its host
    partial = Round(2, layout)   # only fragment 2's floats given: only it is asked for
    partial.contribute(int(layout.block_of[2]) * layout.per_fragment,
                       np.zeros(layout.per_fragment, dtype=np.float32), None,
                       [int(layout.block_of[2])])
    [(packet, _address)] = partial.repair_requests("w1", 12.5)
    assert control_message(packet)["need"] == [[2, 3]]


def test_the_next_datagram_due_is_the_soonest_of_the_senders_none_if_none_queued():
    idle, busy = paced(RecordingSocket(), bytes), paced(RecordingSocket(), bytes)
    assert next_due([idle, busy]) is None
    busy.push([1000, 1001], ("127.0.0.1", 9), 1.0)
    busy.send_due()   # one sent, the next due in about 4 ms (8.3 ms less SEND_AHEAD_S)
    due = next_due(iter([idle, busy]))
    assert due > 0 and due == pytest.approx(busy.wait(), abs=0.001)


def test_keys_of_several_rounds_are_built_a_round_at_once_and_forgotten_rounds_skipped():
    calls = []

    def build(number, indices):
        calls.append((number, indices))
        return None if number == 2 else (indices, [b"%d:%d" % (number, i) for i in indices])
    kept, packets = packets_by_round([(3, 5), (1, 7), (2, 0), (3, 6)], build, datapath("python"))
    assert calls == [(1, [7]), (2, [0]), (3, [5, 6])]
    assert kept == [(1, 7), (3, 5), (3, 6)] and packets == [b"1:7", b"3:5", b"3:6"]


def test_a_layout_reads_what_it_may_borrow_and_refuses_a_borrow_that_is_not_one():
    assert JobLayout(report()).borrow is None
    allowed = JobLayout(dict(report(), borrow={"dscp": 1, "ceiling_mbps": 20}))
    assert allowed.borrow == (1, 20.0)
    for bad in ({"dscp": 64, "ceiling_mbps": 20}, {"dscp": 1, "ceiling_mbps": 0},
                {"dscp": "1", "ceiling_mbps": 20}, {"dscp": True, "ceiling_mbps": 20},
                {"dscp": 1, "ceiling_mbps": float("nan")},
                {"dscp": 1, "ceiling_mbps": float("inf")}, [1, 20]):
        with pytest.raises(JobError, match="borrow must name a DSCP"):
            JobLayout(dict(report(), borrow=bad))


def test_workers_split_what_they_may_borrow_into_an_aggregator_by_their_floors():
    """agg takes w1's and w2's legs (100 Mbit/s each): the 30 the job may borrow into it
    are 15 toward it from each; w3, whose leg goes to ps, borrows without a bound."""
    borrow = {"dscp": 1, "ceiling_mbps": 1000, "aggregators_mbps": {"agg": 30}}
    layout = JobLayout(dict(report(aggregated=True), borrow=borrow))
    assert layout.borrow_into == {"agg": 30.0}
    assert layout.borrow_limits("w1") == {(ADDRESS["agg"], PORT): 15.0}
    assert layout.borrow_limits("w3") == {}
    assert JobLayout(dict(report(), borrow=dict(borrow, aggregators_mbps={}))).borrow_into == {}
    for bad in ({"agg": -1}, {"agg": float("inf")}, {"agg": float("nan")}, {"agg": "30"},
                {"agg": True}, ["agg"]):
        with pytest.raises(JobError, match="aggregators_mbps must map"):
            JobLayout(dict(report(aggregated=True), borrow=dict(borrow, aggregators_mbps=bad)))


def test_a_hosts_floor_is_everything_the_jobs_rates_send_out_of_it():
    layout = JobLayout(report(aggregated=True))
    assert layout.host_floor_mbps("w1") == 100.0    # its leg
    assert layout.host_floor_mbps("agg") == 100.0   # its aggregate
    assert layout.host_floor_mbps("ps") == 100.0    # its shard's one return tree
    assert layout.host_floor_mbps("stranger") == 0.0


def test_a_round_fails_after_two_predicted_rounds_when_they_are_long():
    assert round_fail_s(JobLayout(report())) == ROUND_FAIL_S   # no prediction
    assert round_fail_s(JobLayout(dict(report(), predicted_round_s=0.5))) == ROUND_FAIL_S
    assert round_fail_s(JobLayout(dict(report(), predicted_round_s=7.0))) == 14.0
