"""From which round a job's new rates hold (services/job_rounds.py): past the furthest
round a running worker began, by as many as the workers begin while they read the new
generation, so that none has begun it when it reads it; any round when none runs."""

from syncfabric.services.job_rounds import QUIET_S, RoundReports


def test_slow_rounds_take_effect_from_the_next_and_fast_ones_further_on():
    slow, fast = RoundReports(), RoundReports()
    for second in range(4):   # a round every 2 s, and 10 rounds a second
        slow.heard("h1", 1 + second // 2, float(second))
        fast.heard("h1", 1 + 10 * second, float(second))
    slow.heard("h3", 1, 3.0)
    assert slow.effective_round(3.0) == 2 + 1
    assert fast.effective_round(3.0) == 31 + 1 + 10
    assert not fast.passed(42, 3.0) and fast.passed(31, 3.0)


def test_with_no_worker_running_any_round_will_do():
    reports = RoundReports()
    assert reports.effective_round(0.0) == 0
    reports.heard("h1", 7, 0.0)
    assert reports.effective_round(QUIET_S + 1) == 0 and reports.passed(99, QUIET_S + 1)
