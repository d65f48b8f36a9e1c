"""From which round a job's new rates hold (services/job_rounds.py): past the furthest
round a running worker began, by as many as the workers begin while they read the new
generation, so that none has begun it when it reads it; any round when none runs."""

from syncfabric.services.job_rounds import QUIET_S, RoundReports, parse_paced


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


def test_a_worker_with_every_round_back_need_not_begin_the_next_one():
    """A worker computing between rounds (every round it began back) holds new rates'
    round only until it says so in a read of their generation: that read gave it the
    new rates, and it sends nothing of the old rounds. Said in a read of an older
    generation, or with a round still out, it must begin the effective round."""
    reports = RoundReports()
    reports.heard("h1", 4, 0.0, back=4, generation=1)   # computing, read generation 1
    reports.heard("h2", 4, 0.0, back=3, generation=2)   # round 4 still out
    assert reports.effective_round(0.0) == 5
    assert not reports.passed(5, 0.0, generation=2)
    reports.heard("h2", 4, 0.5, back=4, generation=2)   # its round 4 back now
    assert not reports.passed(5, 0.5, generation=2)     # h1 has not read generation 2
    reports.heard("h1", 4, 0.5, back=4, generation=2)   # reads it, computing still
    assert reports.passed(5, 0.5, generation=2)
    assert not reports.passed(5, 0.5)                   # without the generation: begin it
    reports.heard("h3", 2, 0.5, back=9, generation=2)   # back past what it began: not believed
    assert not reports.passed(5, 0.5, generation=2)


def test_a_worker_that_sent_the_effective_round_at_the_old_rates_passes_once_it_is_back():
    """A worker that began the round a new generation holds from before it read that
    generation sent it at the old rates (it says `paced`, the oldest generation of its
    rounds out): it has not passed until that round is back, whatever round it began."""
    reports = RoundReports()
    reports.heard("h1", 5, 0.0, back=4, generation=2, paced=1)   # round 5 out at gen 1's rates
    assert not reports.passed(5, 0.0, generation=2)
    assert reports.passed(5, 0.0)   # a caller that names no generation: it began it
    reports.heard("h1", 6, 0.5, back=4, generation=2, paced=1)   # round 6 at 2's, 5 still out
    assert not reports.passed(5, 0.5, generation=2)
    reports.heard("h1", 6, 1.0, back=5, generation=2, paced=2)   # round 5 back
    assert reports.passed(5, 1.0, generation=2)
    reports.heard("h1", 6, 1.5, back=6, generation=2)            # nothing out: says none
    assert reports.passed(5, 1.5, generation=2)


def test_a_read_says_the_generation_its_rounds_out_went_at_as_a_whole_number():
    assert parse_paced({"paced": "3"}) == 3
    assert [parse_paced(query) for query in ({}, {"paced": "0"}, {"paced": "-1"},
                                             {"paced": "2.5"}, {"paced": "x"})] == [None] * 5
