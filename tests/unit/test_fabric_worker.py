"""FabricWorker on loopback (tests/harness/loopback_jobs.py), two workers in one process,
each holding one shard: a round given in pieces, in any order, sums exactly and answers
each piece; a round's stats are filed before its Future ends; a piece given twice is
refused; a first pass slower than the repair timer sends nothing twice; a worker waiting
asks again for its oldest round alone; a round handed over before its start makes its
datagrams then and sends them from its start; and a worker is served once the other's
shard answers its hello."""

import time
from concurrent.futures import wait

import numpy as np
import pytest

from syncfabric.hosts.jobs import worker_sends
from syncfabric.hosts.jobs.fabric_worker import REPAIR_QUIET_S, FabricWorker
from syncfabric.hosts.jobs.job_layout import JobError
from syncfabric.hosts.jobs.phase_windows import paced_query
from syncfabric.hosts.jobs.worker_rounds import Round
from syncfabric.hosts.transport.pacing import send_streams
from tests.harness.loopback_jobs import loopback_job

pytestmark = pytest.mark.usefixtures("each_datapath")   # both data paths

FLOATS = 362 * 100   # a hundred fragments


@pytest.fixture
def workers(request):
    rate_mbps = getattr(request, "param", 400.0)
    report = loopback_job(90, ["w1", "w2"], FLOATS * 4, 29700, rate_mbps)
    pair = [FabricWorker(report, name) for name in ("w1", "w2")]
    yield pair
    for worker in pair:
        worker.close()


def values(worker):
    """Whole numbers: any order of summation is exact."""
    return np.arange(FLOATS, dtype=np.float32) % 1000 + worker


def test_a_round_given_in_pieces_in_any_order_sums_exactly(workers):
    cut = 12_345   # not on a fragment's edge
    futures = [workers[0].reduce_part(cut, values(0)[cut:]), workers[0].reduce_part(0, values(0)[:cut]),
               workers[1].reduce_part(0, values(1)[:cut]), workers[1].reduce_part(cut, values(1)[cut:])]
    wait(futures, timeout=20)
    total = values(0) + values(1)
    assert np.array_equal(futures[0].result(), total[cut:])
    assert np.array_equal(futures[1].result(), total[:cut])
    assert np.array_equal(np.concatenate([futures[2].result(), futures[3].result()]), total)


def test_a_rounds_stats_are_filed_before_its_future_ends(workers):
    """A Future's callbacks run as it ends, in the I/O thread: the stats are there."""
    filed = []
    futures = [worker.allreduce_async(values(i)) for i, worker in enumerate(workers)]
    for worker, future in zip(workers, futures):
        future.add_done_callback(lambda _future, worker=worker: filed.append(1 in worker.stats))
    wait(futures, timeout=20)
    assert filed == [True, True]


def test_a_piece_given_twice_or_outside_the_round_is_refused(workers):
    workers[0].reduce_part(0, values(0)[:1000])
    with pytest.raises(ValueError, match="were given already"):
        workers[0].reduce_part(500, values(0)[500:1500])
    with pytest.raises(ValueError, match="is not among them"):
        workers[0].reduce_part(FLOATS - 10, values(0)[:20])


@pytest.mark.parametrize("workers", [2.0], indirect=True)
def test_a_first_pass_slower_than_the_repair_timer_sends_nothing_twice(workers):
    """w2 starts late: w1 asks for repairs while it waits, but not while it still sends."""
    first = workers[0].allreduce_async(values(0))
    time.sleep(0.25)
    second = workers[1].allreduce_async(values(1))
    wait([first, second], timeout=20)
    assert np.array_equal(first.result(), values(0) + values(1))
    stats = workers[0].stats[1]
    assert stats["first_pass_s"] > 2 * REPAIR_QUIET_S   # the pass outlasts the repair timer
    assert stats["resent"] == 0 and workers[1].stats[1]["resent"] == 0


def test_a_worker_waiting_asks_again_for_its_oldest_round_alone(workers):
    """w2 gives three rounds late: w1 asks its shards again for the first every
    REPAIR_QUIET_S meanwhile, and for the two after it only once the first is back (a
    shard returns its rounds in order): once, twice on a busy machine."""
    first = [workers[0].allreduce_async(values(0)) for _round in range(3)]
    time.sleep(6.5 * REPAIR_QUIET_S)
    second = [workers[1].allreduce_async(values(1)) for _round in range(3)]
    wait(first + second, timeout=20)
    assert all(np.array_equal(done.result(), values(0) + values(1)) for done in first)
    asked = [workers[0].stats[number]["repair_requests"] for number in (1, 2, 3)]
    assert asked[0] >= 3 and max(asked[1:]) <= 2, asked


@pytest.mark.parametrize("workers", [4.0], indirect=True)
def test_a_first_pass_wakes_its_worker_once_per_datagram_sent_at_most(workers, monkeypatch):
    """While w1 paces its fragments out, the other's fragments to w1's shard and its sums
    come in: w1 takes them when it wakes to send, not one wakeup each."""
    first, passing, wakeups = workers[0], [], []
    select = first.selector.select

    def counted_select(timeout):
        wakeups.extend(passing)
        return select(timeout)

    def first_pass(sock, streams, idle, *arguments):
        mine = [1] if sock is first.sock else []
        passing.extend(mine)
        borrowed = send_streams(sock, streams, idle, *arguments)
        del passing[:len(mine)]
        return borrowed
    first.selector.select = counted_select
    monkeypatch.setattr(worker_sends, "send_streams", first_pass)
    futures = [worker.allreduce_async(values(i)) for i, worker in enumerate(workers)]
    wait(futures, timeout=20)
    assert np.array_equal(futures[0].result(), values(0) + values(1))
    assert 0 < len(wakeups) <= first.stats[1]["sent"]


def test_a_worker_says_the_generation_of_the_rates_its_round_out_went_at(workers):
    """w1's first pass goes out while w2 has not begun: its round is out, sent at its
    layout's generation, until w2's part brings the sums back; the round's stats keep it."""
    first = workers[0].allreduce_async(values(0))
    deadline = time.monotonic() + 10
    while not any(r.stats["generation"] for r in list(workers[0].rounds.values())):
        assert time.monotonic() < deadline, "w1's first pass never went out"
        time.sleep(0.01)
    assert paced_query(workers[0].rounds) == "&paced=%d" % workers[0].layout.generation
    wait([first, workers[1].allreduce_async(values(1))], timeout=20)
    assert paced_query(workers[0].rounds) == ""
    assert workers[0].stats[1]["generation"] == workers[0].layout.generation   # its line says


class RecordedSends:
    """A data path whose sends from `sock` are timed (time.time())."""

    def __init__(self, path, sock, times):
        self.path, self.sock, self.times = path, sock, times

    def send(self, sock, *arguments):
        if sock is self.sock:
            self.times.append(time.time())
        return self.path.send(sock, *arguments)

    def __getattr__(self, name):
        return getattr(self.path, name)


def test_a_round_handed_over_early_is_made_then_and_sent_from_its_start(workers, monkeypatch):
    made, sent = [], []
    make = Round.packets
    monkeypatch.setattr(Round, "packets",
                        lambda *arguments: made.append(time.time()) or make(*arguments))
    workers[0].sends.path = RecordedSends(workers[0].path, workers[0].sock, sent)
    start_at = time.time() + 0.5
    futures = [worker.allreduce_async(values(i), start_at) for i, worker in enumerate(workers)]
    wait(futures, timeout=20)
    assert np.array_equal(futures[0].result(), values(0) + values(1))
    assert made and max(made) < start_at <= min(sent) + 0.001
    assert workers[0].stats[1]["first_pass_s"] < 0.25   # timed from its start


def test_a_worker_is_served_once_every_node_it_sends_to_answers_hello():
    report = loopback_job(91, ["w1", "w2"], FLOATS * 4, 29720)
    first = FabricWorker(report, "w1")
    try:
        with pytest.raises(JobError, match=r"w2 \(shard 1's host\) did not answer for 0.3 s"):
            first.wait_served(timeout_s=0.3)   # w2, which holds the other shard, is not up
        second = FabricWorker(report, "w2")
        started = time.monotonic()
        first.wait_served()
        second.wait_served()
        assert time.monotonic() - started < 1.0
        assert first.ready == {("127.0.0.12", 29721)} and second.ready == {("127.0.0.11", 29720)}
        second.close()
    finally:
        first.close()


@pytest.mark.parametrize("said", [None, {"w1": 0.0, "w2": 10.0}])
def test_a_worker_borrows_no_more_than_its_jobs_least_borrowing_worker_for_its_floor(said):
    """Both may borrow up to their link's 60 Mbit/s: unheld, w2's first pass lends
    some of its datagrams; where w1 says it borrows nothing, w2 lends none (its round
    would wait for w1's part all the same)."""
    report = dict(loopback_job(91, ["w1", "w2"], FLOATS * 4, 29710, 20.0),
                  borrow={"dscp": 1, "ceiling_mbps": 60.0}, borrowed_by=said)
    pair = [FabricWorker(report, name) for name in ("w1", "w2")]
    try:
        futures = [worker.allreduce_async(values(i)) for i, worker in enumerate(pair)]
        wait(futures, timeout=20)
        assert np.array_equal(futures[1].result(), values(0) + values(1))
        lent = pair[1].stats[1]["borrowed"]
        assert lent == 0 if said else lent > 0
    finally:
        for worker in pair:
            worker.close()
