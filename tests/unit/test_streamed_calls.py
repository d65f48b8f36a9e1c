"""Calls of any length through a job's rounds (FabricWorker.allreduce_async), on loopback
(tests/harness/loopback_jobs.py), two workers in one process on both data paths: calls
shorter and longer than a round, and ones that straddle rounds, sum exactly; a round's
length at a round's edge is that whole round; a call that leaves a round little room
ends that round; a call over many more rounds than a summing node keeps sums exactly,
with no more than ROUNDS_IN_FLIGHT rounds open at once; streaming after a round given
out of order is refused; a datagram lost from a call whose round is
never given whole is repaired; a worker late to a call is waited for, and a call that
no other worker joins fails after LATE_WORKER_S, naming the host it waits for."""

import time
from concurrent.futures import wait

import numpy as np
import pytest

from syncfabric.hosts.jobs import fabric_worker, round_stalls
from syncfabric.hosts.jobs.fabric_worker import FabricWorker
from syncfabric.hosts.jobs.job_layout import JobError
from syncfabric.hosts.jobs.job_roles import KEPT_ROUNDS
from tests.harness.loopback_jobs import loopback_job

pytestmark = pytest.mark.usefixtures("each_datapath")   # both data paths

PER_FRAGMENT = 362
FLOATS = PER_FRAGMENT * 20 + 100   # twenty fragments and a short one


@pytest.fixture
def workers():
    report = loopback_job(96, ["w1", "w2"], FLOATS * 4, 29980)   # ports and job of its own
    pair = [FabricWorker(report, name) for name in ("w1", "w2")]
    yield pair
    for worker in pair:
        worker.close()


def values(length, worker, seed):
    """Whole numbers: any order of summation is exact."""
    return (np.arange(length, dtype=np.float32) * 7 + seed) % 1000 + worker


def test_calls_of_any_length_stream_through_the_rounds_and_sum_exactly(workers):
    lengths = [1, 1000, 3 * PER_FRAGMENT, 5000, FLOATS, 2 * FLOATS + 7, 362, FLOATS - 1]
    futures = {(i, n): worker.allreduce_async(values(length, i, n))
               for n, length in enumerate(lengths) for i, worker in enumerate(workers)}
    wait(futures.values(), timeout=20)
    for n, length in enumerate(lengths):
        total = values(length, 0, n) + values(length, 1, n)
        assert np.array_equal(futures[0, n].result(), total), length
        assert np.array_equal(futures[1, n].result(), total), length
    # 36815 floats, and 971 zeros to the edges of their last fragments: five whole
    # rounds of 7340, and 1086 floats (three fragments) of a sixth
    assert workers[0].filling.next_round == 7
    assert workers[0].filling.stream_offset() == 3 * PER_FRAGMENT


def test_a_whole_rounds_length_at_a_rounds_edge_is_that_round(workers):
    futures = [worker.allreduce_async(values(FLOATS, i, 0)) for i, worker in enumerate(workers)]
    wait(futures, timeout=20)
    assert np.array_equal(futures[0].result(), values(FLOATS, 0, 0) + values(FLOATS, 1, 0))
    assert 1 in workers[0].stats and workers[0].filling.filling is None   # round 1, whole


def test_a_call_that_leaves_little_of_its_round_ends_it(workers):
    lengths = [FLOATS - PER_FRAGMENT, 400]   # the first leaves 100 floats: one 16th at most
    for n, length in enumerate(lengths):
        futures = [worker.allreduce_async(values(length, i, n))
                   for i, worker in enumerate(workers)]
        wait(futures, timeout=20)
        assert np.array_equal(futures[0].result(), values(length, 0, n) + values(length, 1, n))
        if n == 0:   # the 100 floats left were zeros: round 1 went whole with the call
            assert 1 in workers[0].stats and workers[0].filling.filling is None
    assert workers[0].filling.next_round == 3   # and 400 floats began round 2
    assert workers[0].filling.stream_offset() == 2 * PER_FRAGMENT


def test_a_call_over_many_rounds_sums_exactly_a_few_rounds_at_a_time(workers, monkeypatch):
    contribute, ahead = FabricWorker._contribute, []

    def counted(worker, number, *rest):   # how far past the oldest open round each begins
        ahead.append(number - min(worker.rounds, default=number))
        contribute(worker, number, *rest)
    monkeypatch.setattr(FabricWorker, "_contribute", counted)
    length = 3 * KEPT_ROUNDS * FLOATS
    futures = [worker.allreduce_async(values(length, i, 5)) for i, worker in enumerate(workers)]
    wait(futures, timeout=60)
    assert np.array_equal(futures[0].result(timeout=0), values(length, 0, 5) + values(length, 1, 5))
    assert max(ahead) == fabric_worker.ROUNDS_IN_FLIGHT - 1


def test_streaming_after_a_round_given_out_of_order_is_refused(workers):
    workers[0].reduce_part(1000, values(500, 0, 0))
    with pytest.raises(ValueError, match="give the rest of it before streaming more"):
        workers[0].allreduce_async(values(10, 0, 0))
    assert workers[0].filling.filling[1].sum() == 500   # nothing more was taken


class DroppingSends:
    """A data path that loses the first datagram `sock` sends (counted as sent)."""

    def __init__(self, path, sock):
        self.path, self.sock, self.dropped = path, sock, False

    def send(self, sock, packets, first, stop, address):
        if sock is not self.sock or self.dropped or stop <= first:
            return self.path.send(sock, packets, first, stop, address)
        self.dropped = True
        return 1 + self.path.send(sock, packets, first + 1, stop, address)

    def __getattr__(self, name):
        return getattr(self.path, name)


def test_a_lost_datagram_of_a_call_in_a_round_never_whole_is_repaired(workers):
    first = workers[0]
    first.sends.path = DroppingSends(first.path, first.sock)
    futures = [worker.allreduce_async(values(5000, i, 3)) for i, worker in enumerate(workers)]
    wait(futures, timeout=20)
    assert first.sends.path.dropped
    assert np.array_equal(futures[1].result(timeout=0), values(5000, 0, 3) + values(5000, 1, 3))
    assert first.rounds[1].stats["resent"] >= 1 and not first.rounds[1].sent


def test_a_worker_late_to_a_call_is_waited_for_past_round_fail_s(workers, monkeypatch,
                                                                  caplog):
    """w2 joins 1.5 s after w1 (a rank that saved a checkpoint first), three times
    ROUND_FAIL_S, in a call of three rounds: w1's oldest round waits and says whom for
    once, the two behind it wait behind it, and the call sums exactly."""
    monkeypatch.setattr(round_stalls, "ROUND_FAIL_S", 0.5)
    first = workers[0].allreduce_async(values(2 * FLOATS + 7, 0, 4))
    time.sleep(1.5)
    second = workers[1].allreduce_async(values(2 * FLOATS + 7, 1, 4))
    wait([first, second], timeout=20)
    total = values(2 * FLOATS + 7, 0, 4) + values(2 * FLOATS + 7, 1, 4)
    assert np.array_equal(first.result(timeout=0), total)
    assert np.array_equal(second.result(timeout=0), total)
    said = [r.getMessage() for r in caplog.records if "waits for w2" in r.getMessage()]
    assert len(said) == 1 and "round 1 of job 96 waits for w2: they have given it nothing" \
        in said[0]


def test_a_call_no_other_worker_joins_fails_naming_the_host_it_waits_for(workers,
                                                                       monkeypatch):
    """Waited for up to LATE_WORKER_S, not for ever: then it fails, naming w2."""
    monkeypatch.setattr(round_stalls, "ROUND_FAIL_S", 0.5)
    monkeypatch.setattr(round_stalls, "LATE_WORKER_S", 1.5)
    started = time.monotonic()
    future = workers[0].allreduce_async(values(5000, 0, 4))
    with pytest.raises(JobError, match=r"round 1 of job 96 failed: nothing came back for 1.5 s; "
                       r"w2 \(sends its fragments to shard 0\); w2 \(shard 1.s host\) lacks"):
        future.result(timeout=10)
    assert 1.5 <= time.monotonic() - started < 4
