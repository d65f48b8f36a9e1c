"""A worker's side of interleaving (hosts/jobs/phase_windows.py): when its rounds start,
what it tells the controller of its iteration, and that it follows its window from the
reads it makes anyway (rate_following.JobFollower)."""

import socket
from types import SimpleNamespace

import pytest

from syncfabric.hosts.jobs.job_layout import JobLayout
from syncfabric.hosts.jobs.phase_windows import (LATE_FRACTION, IterationTimes, PhaseWindow,
                                                 WorkerCadence, window_of)
from syncfabric.hosts.jobs.rate_following import JobFollower, RateSchedule
from syncfabric.hosts.transport.borrowing import START_FRACTION, Borrowing
from syncfabric.traffic_classes import BORROWED_DSCP
from tests.unit.test_job_roles import report


def test_a_report_without_a_believable_window_runs_freely():
    assert window_of({}) is None
    assert window_of({"period_s": None, "phase_offset_s": None}) is None
    for period, offset in ((0, 0), (-1, 0), (float("inf"), 0), (2.0, float("nan")), (True, 0),
                           ("2", 0)):
        assert window_of({"period_s": period, "phase_offset_s": offset}) is None
    assert window_of({"period_s": 2, "phase_offset_s": 5}) == (2.0, 1.0, None, None)


def test_a_round_in_its_window_sends_at_the_rate_alone_the_controller_placed_it_at():
    """window_mbps over the job's rate_mbps: what its rounds send in all from their
    window's start; none that is not above its floor, or not a number, and none without
    a window."""
    window = {"period_s": 10.0, "phase_offset_s": 3.0, "window_s": 4.5}
    assert window_of(dict(window, window_mbps=30.0, rate_mbps=12.0)).rate_factor == 2.5
    for alone, floor in ((12.0, 12.0), (10.0, 12.0), (float("nan"), 12.0), ("30", 12.0),
                         (30.0, 0.0), (30.0, None), (None, 12.0)):
        assert window_of(dict(window, window_mbps=alone, rate_mbps=floor)).rate_factor is None
    assert window_of({"window_mbps": 30.0, "rate_mbps": 12.0}) is None


def test_a_round_borrows_for_window_s_from_its_windows_start():
    window = PhaseWindow({"period_s": 10.0, "phase_offset_s": 3.0, "window_s": 4.5})
    assert window.window == (10.0, 3.0, 4.5, None)
    assert window.borrow_until(1003.0) == 1007.5
    assert window.borrow_until(None) is None                          # not on a window
    for unbounded in (None, 0, -1, float("nan"), "4.5", True):        # borrows to its end
        window.follow({"period_s": 10.0, "phase_offset_s": 3.0, "window_s": unbounded})
        assert window.window == (10.0, 3.0, None, None)
        assert window.borrow_until(1003.0) is None


def test_a_round_starts_at_its_next_window_or_at_once_if_a_little_late():
    window = PhaseWindow({"period_s": 10.0, "phase_offset_s": 3.0})
    assert window.next_start(1000.0) == 1003.0                       # early: waits
    assert window.next_start(1003.0) == 1003.0                       # on time
    late = 1003.0 + LATE_FRACTION * 10.0 - 0.01
    assert window.next_start(late) == 1003.0                         # a little late: at once
    assert window.next_start(1003.0 + LATE_FRACTION * 10.0 + 0.01) == 1013.0   # the next one
    window.follow({"period_s": 10.0, "phase_offset_s": 5.0})   # moved once it planned
    assert window.planned_by.phase_offset_s == 3.0             # what the round started by
    window.follow({"period_s": None, "phase_offset_s": None})
    assert window.next_start(1000.0) is None
    assert window.planned_by is None


def test_a_worker_says_its_last_round_and_its_compute():
    timing = IterationTimes()
    assert timing.query() == ""            # nothing known yet
    timing.called(1, None, 100.0)
    assert timing.query() == "&back=0"     # round 1 in flight: every round before it back
    timing.back(1, 100.5)
    assert timing.query() == "&back=1"     # computing
    timing.called(2, 101.5, 101.2)         # computed 0.7 s; its round waits for 101.5
    timing.called(3, None, 101.3)
    assert timing.query() == "&back=1&comm_s=0.5000&compute_s=0.7000"
    timing.back(3, 102.0)                  # round 2 still out: not back through 3
    assert timing.back_through() == 1
    timing.back(2, 102.1)
    assert timing.query() == "&back=3&comm_s=0.6000&compute_s=0.7000"
    timing.back(7, 103.0)                  # a round it never started changes nothing
    assert (timing.comm_s, timing.compute_s) == (pytest.approx(0.6), pytest.approx(0.7))
    timing.computed(102.4)                 # asks for its window after 0.3 s of compute,
    timing.called(4, 103.0, 102.95)        # and waits for it: not compute
    assert timing.compute_s == pytest.approx(0.3)


class RecordingClient:
    """A controller that answers every read with `report` and keeps the paths asked."""

    def __init__(self, report):
        self.report, self.paths = report, []

    def get_changed(self, path, etag):
        self.paths.append(path)
        return self.report, "W/\"1\""

    def briefly(self, _timeout_s):
        return self

    def close(self):
        self.paths.append("closed")

    def request(self, method, path):
        self.paths.append(path)
        return self.report


def test_the_follower_says_the_iteration_takes_the_window_and_says_when_it_ends():
    layout_report = report()
    layout = JobLayout(layout_report)
    timing, window = IterationTimes(), PhaseWindow(layout_report)
    timing.comm_s, timing.compute_s = 0.25, 0.5
    client = RecordingClient(dict(layout_report, period_s=4.0, phase_offset_s=1.0, window_s=2.0))
    follower = JobFollower(client, "h1", RateSchedule(layout), lambda: 3, window, timing.query)
    try:
        follower.read_once()
    finally:
        follower.stop()
    assert client.paths == ["/jobs/%d?worker=h1&round=3&comm_s=0.2500&compute_s=0.5000"
                            % layout.id, "closed", "/jobs/%d?worker=h1&round=3&done=1" % layout.id]
    assert window.window == (4.0, 1.0, 2.0, None)


def test_a_worker_says_the_rate_it_borrows_beside_its_iteration():
    cadence = WorkerCadence({"period_s": None})
    cadence.timing.comm_s, cadence.timing.compute_s = 0.5, 0.25
    assert cadence.query(None, {}) == "&comm_s=0.5000&compute_s=0.2500"   # it may not borrow
    borrowing = Borrowing(socket.socket(socket.AF_INET, socket.SOCK_DGRAM), BORROWED_DSCP, 20.0)
    try:
        borrowing.set_floor(5.0, 10.0)   # half its host's floor: half the 10 spare
        assert cadence.query(borrowing, {}) \
            == "&comm_s=0.5000&compute_s=0.2500&borrowed_mbps=%.3f" % (START_FRACTION * 5.0)
    finally:
        borrowing.sock.close()


def test_a_worker_says_the_oldest_generation_its_rounds_out_went_at():
    """A round whose first pass went at generation 2's rates, beside one at 3 and one not
    sent yet: it says 2 until that round is back, then nothing of rates in use."""
    cadence = WorkerCadence({"period_s": None})
    rounds = {7: paced_at(3), 6: paced_at(2), 8: paced_at(None)}
    assert cadence.query(None, rounds) == "&paced=2"
    del rounds[6]
    assert cadence.query(None, rounds) == "&paced=3"
    assert cadence.query(None, {8: paced_at(None)}) == ""


def paced_at(generation):
    """A round in flight whose first passes went at `generation`'s rates (None: unsent)."""
    return SimpleNamespace(stats={"generation": generation})


def test_a_worker_takes_a_window_given_without_a_new_generation_into_its_rates():
    """Its first passes and its own shards' sums borrow to the rate alone from the
    layout of their round (JobLayout.window_factor): one source, taken from every read."""
    layout_report = report()
    schedule = RateSchedule(JobLayout(layout_report))
    client = RecordingClient(dict(layout_report, period_s=4.0, phase_offset_s=1.0,
                                  window_s=2.0, window_mbps=30.0, rate_mbps=12.0))
    follower = JobFollower(client, "h1", schedule, lambda: 3, PhaseWindow(layout_report),
                           lambda: "")
    try:
        follower.read_once()
    finally:
        follower.stop()
    assert schedule.at(3).window_factor == 2.5
