"""Borrowing beyond a floor (syncfabric/hosts/transport/borrowing.py) with a socket that
records each datagram's class: a first pass from both ends, the floor's datagrams from
the front unmarked and the borrowed ones from the back marked, each sent once; a summing
node's queue the same way, its repairs never marked; the borrowed rate's arithmetic."""

import socket
import time

import numpy as np
import pytest

from syncfabric.hosts.datapath import datapath
from syncfabric.hosts.datapath.python import PythonDatapath
from syncfabric.hosts.transport.borrowing import (MAX_PROBE_WAIT, MIN_SENT, START_FRACTION,
                                                  Borrowing)
from syncfabric.hosts.transport.paced_sender import PacedSender
from syncfabric.hosts.transport.pacing import send_streams
from syncfabric.traffic_classes import BORROWED_DSCP, tos_byte

ADDRESS = ("10.0.0.2", 5000)
BORROWED_TOS = tos_byte(BORROWED_DSCP)
# a first pass's floor and its host's link: 200 datagrams take 0.2 s, so a stall of the
# scheduler on a loaded 2-core machine is small beside it (at 80 Mbit/s, a pass of 20 ms
# lent 28 to 56 of the 200 where 40 are due)
FLOOR_MBPS, CEILING_MBPS = 8.0, 16.0


class ClassRecordingSocket:
    """A socket that keeps every datagram sent, with the TOS byte it was sent with."""

    def __init__(self):
        self.tos, self.sent = 0, []

    def setsockopt(self, level, option, value):
        assert (level, option) == (socket.IPPROTO_IP, socket.IP_TOS)
        self.tos = value

    def sendto(self, packet, _flags, address):
        assert address == ADDRESS
        self.sent.append((self.tos, packet))


def datagrams(count, size=1000):
    return [i.to_bytes(4, "big") * (size // 4) for i in range(count)]


def numbers(sent):
    return [int.from_bytes(packet[:4], "big") for _tos, packet in sent]


class CountedBorrowing(Borrowing):
    """A Borrowing that keeps the sums of what it was told was sent and lost."""

    def __init__(self, *args):
        super().__init__(*args)
        self.total_sent = self.total_lost = 0

    def count(self, sent=0, lost=0, now=None):
        self.total_sent, self.total_lost = self.total_sent + sent, self.total_lost + lost
        super().count(sent, lost, now)


def lending(sock, floor_mbps, ceiling_mbps):
    borrowing = CountedBorrowing(sock, BORROWED_DSCP, ceiling_mbps)
    borrowing.set_floor(floor_mbps, floor_mbps)
    return borrowing


def first_pass(sock, borrowing=None, **timing):
    """200 datagrams sent at FLOOR_MBPS, borrowing from `borrowing` (default: a quarter
    of what CEILING_MBPS leaves above the floor); how many of the last left borrowed.
    timing: send_streams' start and borrow_until."""
    borrowing = borrowing or lending(sock, FLOOR_MBPS, CEILING_MBPS)
    borrowed, = send_streams(sock, [(ADDRESS, datagrams(200), FLOOR_MBPS)],
                             path=PythonDatapath(), borrowing=borrowing, **timing)
    return borrowed


def test_a_first_pass_sends_its_floor_from_the_front_and_borrows_from_the_back():
    sock = ClassRecordingSocket()
    borrowed = first_pass(sock)
    assert sorted(numbers(sock.sent)) == list(range(200))   # every datagram, once
    guaranteed = [n for (tos, _p), n in zip(sock.sent, numbers(sock.sent)) if tos == 0]
    lent = [n for (tos, _p), n in zip(sock.sent, numbers(sock.sent)) if tos == BORROWED_TOS]
    assert len(lent) == borrowed and 0 < borrowed < 200
    assert guaranteed == list(range(200 - borrowed))        # the front, in order
    assert sorted(lent) == list(range(200 - borrowed, 200))  # the back
    assert lent[0] == 199                                    # from its end
    assert sock.tos == 0   # the socket is left guaranteed
    # at 8 Mbit/s of floor and 2 borrowed (a quarter of the 8 spare), a fifth is lent
    assert borrowed == pytest.approx(200 / 5, rel=0.25)


def test_without_borrowing_a_first_pass_is_all_guaranteed():
    sock = ClassRecordingSocket()
    assert send_streams(sock, [(ADDRESS, datagrams(50), 80.0)], path=PythonDatapath()) == [0]
    assert [tos for tos, _packet in sock.sent] == [0] * 50


def test_a_summing_nodes_repairs_are_never_borrowed_and_a_lent_one_asked_again_is_lost():
    sock = ClassRecordingSocket()
    borrowing = lending(sock, 8.0, 16.0)
    packets = dict(enumerate(datagrams(100)))
    sender = PacedSender(sock, lambda keys: (keys, [packets[k] for k in keys]), 1000,
                         PythonDatapath(), borrowing)
    sender.push(range(100), ADDRESS, 8.0)
    while sender.wait() is not None:
        sender.send_due()
    lent = [n for (tos, _p), n in zip(sock.sent, numbers(sock.sent)) if tos == BORROWED_TOS]
    assert sorted(numbers(sock.sent)) == list(range(100)) and lent and 99 in lent
    assert borrowing.total_sent == len(lent)
    sock.sent.clear()
    sender.push([lent[0], 0], ADDRESS, 8.0, repair=True)   # a lent sum and a floor's
    while sender.wait() is not None:
        sender.send_due()
    assert sorted(numbers(sock.sent)) == sorted([lent[0], 0])
    assert [tos for tos, _packet in sock.sent] == [0, 0]   # repairs go guaranteed
    assert borrowing.total_lost == 1


def test_a_summing_nodes_borrowed_pace_follows_its_rate_as_it_rises():
    """One borrowed datagram sent at a rate near nothing (a window's rate alone just
    above the floor) must not hold the next back once the rate rises: timed at the old
    rate, it put the next 8 s ahead, and a job's sums never borrowed again."""
    sock = ClassRecordingSocket()
    borrowing = lending(sock, 8.0, 16.0)
    packets = dict(enumerate(datagrams(100)))
    sender = PacedSender(sock, lambda keys: (keys, [packets[k] for k in keys]), 1000,
                         PythonDatapath(), borrowing)
    borrowing.expect(0.001)
    sender.push(range(100), ADDRESS, 8.0)
    sender.send_due()
    assert BORROWED_TOS in [tos for tos, _packet in sock.sent]   # one, at a crawl
    borrowing.expect(8.0)
    while sender.wait() is not None:
        sender.send_due()
    lent = [tos for tos, _packet in sock.sent].count(BORROWED_TOS)
    assert sorted(numbers(sock.sent)) == list(range(100)) and lent > 30   # about half


def test_a_sender_borrows_its_part_of_what_its_host_leaves_and_loss_cuts_it():
    borrowing = Borrowing(ClassRecordingSocket(), BORROWED_DSCP, 20.0)
    assert not borrowing.active()                 # no floor yet
    borrowing.set_floor(5.0, 10.0)                # half its host's floor: half the 10 spare
    assert borrowing.adaptive.ceiling == 5.0 and borrowing.rate() == START_FRACTION * 5.0
    borrowing.set_floor(5.0, 20.0)                # the host's floor takes the link
    assert not borrowing.active()
    borrowing.set_floor(10.0, 10.0)
    before = borrowing.rate()
    borrowing.count(sent=100, now=10.0)
    borrowing.count(lost=1, now=10.5)             # one of what it lent was lost
    assert borrowing.rate() == before / 2
    cut = borrowing.rate()
    borrowing.count(sent=100, now=11.0)
    borrowing.count(sent=100, now=11.5)           # clean: it probes back up
    assert borrowing.rate() > cut


def test_raises_that_keep_losing_come_ever_more_rarely_and_one_that_holds_hastens_them():
    """Every raise followed by a loss (nothing idle): the clean intervals before the
    next raise double, up to MAX_PROBE_WAIT. Then raises that hold: the wait halves."""
    borrowing = Borrowing(ClassRecordingSocket(), BORROWED_DSCP, 20.0)
    borrowing.set_floor(10.0, 10.0)
    verdicts, update = [], borrowing.adaptive.update
    borrowing.adaptive.update = lambda loss, now: verdicts.append(loss) or update(loss, now)
    clock = iter(range(10, 10_000))

    def interval(lost=0):
        """One interval's verdict; whether it raised the rate."""
        before = len(verdicts)
        borrowing.count(sent=MIN_SENT, lost=lost, now=next(clock))
        return verdicts[before:] == [0.0]

    interval()   # opens the first interval
    waits = []
    for _ in range(7):
        assert not interval(lost=1)
        clean = 1
        while not interval():
            clean += 1
        waits.append(clean)
    assert waits == [2, 4, 8, MAX_PROBE_WAIT, MAX_PROBE_WAIT, MAX_PROBE_WAIT, MAX_PROBE_WAIT]
    rises = [interval() for _ in range(MAX_PROBE_WAIT)]   # raises that hold: 8, 4, 2, 1, 1
    assert [i for i, rose in enumerate(rises) if rose] == [7, 11, 13, 14, 15]


def test_a_first_pass_stops_borrowing_at_the_end_of_its_window():
    """The first pass above, its window over as it starts: nothing leaves borrowed. Its
    borrowing ended 100 ms in: some left borrowed, the rest from the front. Started late,
    its window over by the time it sends: nothing borrowed. Every datagram once each
    way."""
    sock = ClassRecordingSocket()
    started = time.perf_counter()
    assert first_pass(sock, start=started, borrow_until=started) == 0
    assert sorted(numbers(sock.sent)) == list(range(200))
    assert {tos for tos, _packet in sock.sent} == {0}
    sock = ClassRecordingSocket()
    started = time.perf_counter()
    borrowed = first_pass(sock, start=started, borrow_until=started + 0.1)
    assert sorted(numbers(sock.sent)) == list(range(200))
    assert 0 < borrowed < 200
    sock = ClassRecordingSocket()   # late: due in its window, sent after it ended
    started = time.perf_counter()
    assert first_pass(sock, start=started - 1.0, borrow_until=started - 0.5) == 0
    assert sorted(numbers(sock.sent)) == list(range(200))


def test_a_stream_into_an_aggregator_borrows_no_more_than_its_limit():
    """The same first pass as above, toward an aggregator whose spare allows 0.2 Mbit/s
    of it borrowed, not the 2 its host's link would: a tenth as many are lent."""
    sock = ClassRecordingSocket()
    borrowing = lending(sock, FLOOR_MBPS, CEILING_MBPS)
    borrowing.set_floor(FLOOR_MBPS, FLOOR_MBPS, {ADDRESS: 0.2})
    assert borrowing.rate(1.0, ADDRESS) == 0.2 and borrowing.rate(1.0, ("10.0.0.9", 1)) == 2.0
    borrowed = first_pass(sock, borrowing)
    assert sorted(numbers(sock.sent)) == list(range(200))
    assert 0 < borrowed <= 200 * 0.2 / 8.2 + 2   # 0.2 of the 8.2 Mbit/s sent in all


def test_either_data_path_turns_a_rounds_datagrams_around_without_changing_one(each_datapath):
    """What a first pass sends from its back: the fragments as built (the native path's
    headers in one buffer, their floats where they are), in the opposite order."""
    path = datapath()
    values = np.arange(4 * 100, dtype=np.float32)
    built = path.fragments(7, 3, 4, np.arange(4), 1, values, np.arange(4) * 100, 100, 400)
    backward = path.reversed(built)
    assert [backward[i] for i in range(4)] == [built[i] for i in reversed(range(4))]
    assert list(path.lengths(backward)) == list(reversed(list(path.lengths(built))))


def test_a_round_in_its_window_borrows_what_it_expects_at_once_within_the_spare():
    borrowing = Borrowing(socket.socket(socket.AF_INET, socket.SOCK_DGRAM), BORROWED_DSCP, 20.0)
    try:
        borrowing.set_floor(5.0, 10.0)   # half its host's floor: half the 10 spare
        assert borrowing.rate() == pytest.approx(START_FRACTION * 5.0)
        borrowing.expect(4.0)
        assert borrowing.rate() == pytest.approx(4.0)
        borrowing.expect(9.0)
        assert borrowing.rate() == pytest.approx(5.0)   # no more than its spare
        borrowing.count(sent=MIN_SENT, lost=1, now=0.0)
        borrowing.count(now=1.0)
        assert borrowing.rate() == pytest.approx(2.5)   # a loss halves it still
    finally:
        borrowing.sock.close()


def test_a_summing_nodes_first_sums_of_a_round_in_a_window_borrow_to_the_rate_alone():
    """Under interleaving (window_mbps 3x the job's rate), a shard's first sums of each
    round borrow twice their floor at once; a loss halves it for the rest of the round,
    and the next round starts from the window's rate again."""
    from syncfabric.hosts.jobs.job_layout import JobLayout
    from syncfabric.hosts.jobs.job_roles import ShardNode
    from tests.harness.loopback_jobs import loopback_job
    report = dict(loopback_job(7, ["w1", "w2"], 8 * 1448, 29870),
                  borrow={"dscp": BORROWED_DSCP, "ceiling_mbps": 10000.0}, period_s=4.0,
                  phase_offset_s=0.0, window_s=2.0, window_mbps=30.0, rate_mbps=10.0)
    layout = JobLayout(report)
    assert layout.window_factor == 3.0
    assert JobLayout(dict(report, period_s=None)).window_factor is None   # no window
    shard = layout.shards[0]
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        node = ShardNode(layout, shard, sock)
        borrowing = node.sums_out.borrowing
        node._borrow_beyond(2.0, layout, shard.host, 1)
        assert borrowing.rate() == pytest.approx(4.0)
        borrowing.count(sent=MIN_SENT, lost=1, now=0.0)
        borrowing.count(now=1.0)
        node._borrow_beyond(2.0, layout, shard.host, 1)   # the same round's later sums
        assert borrowing.rate() == pytest.approx(2.0)
        node._borrow_beyond(2.0, layout, shard.host, 2)
        assert borrowing.rate() == pytest.approx(4.0)
    finally:
        sock.close()


def test_a_sender_held_to_its_jobs_least_borrowing_worker_borrows_no_more_while_held():
    """Held to 3 Mbit/s (JobLayout.borrow_cap), a sender that expected 8 borrows 3 but
    says 8 (what its losses allow, not its hold); a looser hold lets it borrow 5, no
    hold or a window's expect all 8; clean intervals raise what it says as before."""
    borrowing = Borrowing(ClassRecordingSocket(), BORROWED_DSCP, 20.0)
    borrowing.set_floor(10.0, 10.0)
    borrowing.expect(8.0)
    borrowing.hold_to(3.0)
    assert (borrowing.rate(), borrowing.said()) == (3.0, 8.0)
    borrowing.hold_to(5.0)
    assert borrowing.rate() == 5.0
    borrowing.hold_to(None)
    assert borrowing.rate() == 8.0
    borrowing.hold_to(0.0)
    assert not borrowing.active()
    borrowing.expect(8.0)
    assert borrowing.rate() == 8.0
    borrowing.count(sent=MIN_SENT, now=10.0)
    borrowing.count(sent=MIN_SENT, now=11.0)
    assert borrowing.said() > 8.0


def test_workers_that_all_had_nothing_to_borrow_borrow_again_once_the_link_leaves_some():
    """A job alone, whose floors fill its hosts' links, borrows nothing and its workers
    say 0. Each round a worker is held to what they said in the last (JobLayout.
    borrow_cap), so the round a job joins, and its spare appears, they are held to 0;
    the next, they say their spare and borrow it. A hold that lowered what they said
    kept them all at 0 for the rest of a run."""
    from syncfabric.hosts.jobs.job_layout import JobLayout
    from tests.harness.loopback_jobs import loopback_job
    layout = JobLayout(dict(loopback_job(7, ["w1", "w2"], 8 * 1448, 29870),
                            borrow={"dscp": BORROWED_DSCP, "ceiling_mbps": 20.0}))
    workers = {w: Borrowing(ClassRecordingSocket(), BORROWED_DSCP, 20.0) for w in ("w1", "w2")}

    def round_at(floor_mbps):
        for worker, borrowing in workers.items():
            borrowing.set_floor(floor_mbps, floor_mbps)
            borrowing.hold_to(layout.borrow_cap(worker))
        layout.borrowed_by = {w: b.said() for w, b in workers.items()}
        return [b.rate() for b in workers.values()]

    assert round_at(20.0) == [0.0, 0.0]   # the floors fill the link
    assert round_at(20.0) == [0.0, 0.0]
    assert round_at(10.0) == [0.0, 0.0]   # a job joined: held to what they said alone
    assert round_at(10.0) == pytest.approx([START_FRACTION * 10.0] * 2)
