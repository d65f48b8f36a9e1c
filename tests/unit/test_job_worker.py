"""job_worker's rounds on loopback (tests/harness/loopback_jobs.py), two workers in one
process: a round's time is its sum's return, not the making of gradients (before the
first round) nor the check of the sums (after the last); and a sum unlike the workers'
gradients is reported."""

import threading
import time

import pytest

from syncfabric.hosts.jobs import job_worker
from tests.harness.loopback_jobs import loopback_job

pytestmark = pytest.mark.usefixtures("each_datapath")   # both data paths

FLOATS = 362 * 20
SLOW_S = 0.3   # each gradient made and each sum hashed, made this slow


@pytest.fixture
def slow_work(monkeypatch):
    """job_worker on a loopback job, making every gradient and hashing every sum in SLOW_S."""
    report = loopback_job(92, ["w1", "w2"], FLOATS * 4, 29740)
    monkeypatch.setattr(job_worker.FabricJob, "attach", staticmethod(lambda *_: report))
    for name in ("whole_gradient", "digest"):
        monkeypatch.setattr(job_worker, name, slowed(getattr(job_worker, name)))


def slowed(function):
    def slow(*arguments):
        time.sleep(SLOW_S)
        return function(*arguments)
    return slow


def both_workers(rounds, *flags):
    results = {}

    def work(name):
        results[name] = job_worker.run(job_worker.parse_args(
            ["--controller", "http://unused", "--job", "92", "--name", name,
             "--rounds", str(rounds), *flags]))
    threads = [threading.Thread(target=work, args=(name,), name=name) for name in ("w1", "w2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results


def test_a_rounds_time_leaves_out_making_gradients_and_checking_sums(slow_work):
    results = both_workers(rounds=2)
    for lines in results.values():
        assert [line["round"] for line in lines] == [1, 2]
        assert all(line["exact"] for line in lines)
        # made or checked in the round, it would take SLOW_S or more
        assert all(line["seconds"] < SLOW_S for line in lines), lines
        # when each ran, on the clock the fidelity samples keep (time.time(); "seconds" is
        # timed on another, so within a millisecond)
        first, second = lines
        assert first["started_at"] + first["seconds"] - 0.001 <= second["started_at"] <= time.time()


def test_a_sum_unlike_the_workers_gradients_is_reported(slow_work, monkeypatch):
    """w1 checks against a w2 gradient one higher than w2 gave."""
    made = job_worker.whole_gradient

    def w2_seen_wrong_by_w1(seed, worker, number, floats):
        return made(seed, worker, number, floats) + (
            worker == 1 and threading.current_thread().name == "w1")
    monkeypatch.setattr(job_worker, "whole_gradient", w2_seen_wrong_by_w1)
    results = both_workers(rounds=1)
    assert [results[name][0]["exact"] for name in ("w1", "w2")] == [False, True]


def test_with_every_each_round_starts_on_the_shared_schedule(slow_work, monkeypatch):
    """...and the sums are checked in the slot after the last round, not during it."""
    made_at, make = [], job_worker.whole_gradient   # made again to check the sums
    monkeypatch.setattr(job_worker, "whole_gradient",
                        lambda *arguments: made_at.append(time.time()) or make(*arguments))
    start_at, every = time.time() + 1.0, 1.5   # the last round over, and SHARD_LINGER_S
    results = both_workers(3, "--start-at", repr(start_at), "--every", repr(every))
    for lines in results.values():
        assert all(line["exact"] for line in lines)
        for line in lines:
            scheduled = start_at + (line["round"] - 1) * every
            assert scheduled <= line["started_at"] < scheduled + 0.05, (line, scheduled)
    assert min(t for t in made_at if t > start_at) >= start_at + 3 * every


@pytest.mark.parametrize("flags", [["--every", "1"], ["--every", "0", "--start-at", "1"],
                                   ["--every", "1", "--start-at", "1", "--in-flight", "2"]])
def test_every_without_a_start_or_with_rounds_in_flight_is_refused(flags, capsys):
    with pytest.raises(SystemExit):
        job_worker.parse_args(["--controller", "http://unused", "--job", "1", "--name", "w1",
                               *flags])
    assert "--every needs --start-at, --in-flight 1" in capsys.readouterr().err


def test_a_worker_started_before_its_job_reads_its_id_from_standard_input(monkeypatch):
    """--job -: started before the job exists, it attaches to the id it reads once the
    job is created; any other text than a whole number or - is refused."""
    import io

    from syncfabric.hosts.cli import job_id_of
    args = job_worker.parse_args(["--controller", "http://unused", "--job", "-", "--name", "w1"])
    monkeypatch.setattr("sys.stdin", io.StringIO("17\n"))
    assert job_id_of(args) == "17"
    assert job_id_of(job_worker.parse_args(["--controller", "http://unused", "--job", "17",
                                            "--name", "w1"])) == 17
    with pytest.raises(SystemExit):
        job_worker.parse_args(["--controller", "http://unused", "--job", "x", "--name", "w1"])
