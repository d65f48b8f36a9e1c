"""The phase solver (decisions/phase_schedule.py): jobs that share a contended link get
windows that do not overfill it where the period allows, checked against a brute force."""

import itertools
import random

import numpy as np
import pytest

from syncfabric.decisions.phase_schedule import (FIT, PERIOD_MARGIN, Iteration, Window,
                                                 added_overflow, arc_steps, contended_resources,
                                                 fits_at_scale, schedule)

GRID = 24     # the brute force's offsets: the period in this many steps
FINE = 480    # the steps on which a placement's overflow is judged, finer than the solver's


def overflow(windows, usage):
    """How much the jobs of `windows` overfill the contended resources they share, each
    communicating comm_s from its offset in every period: the fraction above 1 summed
    over a period (in seconds) and the resources."""
    total = 0.0
    for resource in contended_resources({job: usage[job] for job in windows}):
        load = np.zeros(FINE)
        for job, window in windows.items():
            if resource in usage[job]:
                t = (np.arange(FINE) + 0.5) / FINE * window.period_s
                busy = (t - window.phase_offset_s) % window.period_s < window.comm_s
                load += min(1.0, usage[job][resource]) * busy
        total += np.maximum(0.0, load - 1.0).sum() * window.period_s / FINE
    return total


def brute_force_overflow(iterations, usage, windows):
    """The least overflow any offsets on a grid of the period give (the first job of each
    group fixed at 0: turning every circle alike changes nothing)."""
    jobs = sorted(windows)
    best = None
    for offsets in itertools.product(range(GRID), repeat=len(jobs) - 1):
        trial = {job: Window(windows[job].period_s, step * windows[job].period_s / GRID,
                             iterations[job].comm_s)
                 for job, step in zip(jobs, (0,) + offsets)}
        found = overflow(trial, usage)
        best = found if best is None else min(best, found)
    return best


def test_a_round_covers_whole_steps_and_only_overflow_counts():
    period = 96.0 / 10   # a step is 0.1 s
    assert arc_steps(0.25, period).sum() == 3 and arc_steps(0.25, period)[:3].all()
    assert arc_steps(50.0, period).sum() == 96                     # longer than the period
    load = np.array([0.5, 1.0, 1.5])
    assert added_overflow(load, np.array([0.5, 0.5, 0.5])) == pytest.approx(0.0 + 0.5 + 0.5)


def test_jobs_on_one_link_take_turns():
    iterations = {job: Iteration(1.0, 2.0) for job in (1, 2)}
    windows = schedule(iterations, {1: {"spine": 1.0}, 2: {"spine": 1.0}})
    assert windows[1].period_s == pytest.approx(2.0 * (1 + PERIOD_MARGIN))
    assert windows[1].period_s == windows[2].period_s
    assert overflow(windows, {1: {"spine": 1.0}, 2: {"spine": 1.0}}) == 0
    assert windows[1].rate_scale == windows[2].rate_scale == 1.0   # apart: each alone


def test_the_period_grows_to_the_busiest_link():
    """Four jobs whose rounds need a link whole, computing three times as long as they
    communicate, and a little longer: their period is four rounds, and no two windows
    overlap."""
    iterations = {job: Iteration(1.0, 3.5) for job in range(4)}
    windows = schedule(iterations, {job: {"spine": 1.0} for job in range(4)})
    assert windows[0].period_s == pytest.approx(4.0 * (1 + PERIOD_MARGIN))
    assert overflow(windows, {job: {"spine": 1.0} for job in range(4)}) == 0


def test_three_jobs_that_fit_two_at_a_time_are_not_placed_together():
    """Three jobs that each take 0.4 of a link: no two of them would overfill it, all
    three would. They get windows, and none overlaps both others."""
    usage = {job: {"spine": 0.4} for job in range(3)}
    windows = schedule({job: Iteration(1.0, 2.0) for job in range(3)}, usage)
    assert set(windows) == {0, 1, 2}
    assert overflow(windows, usage) == 0


def test_jobs_whose_rounds_do_not_fit_in_an_iteration_run_freely():
    """Computing as long as they communicate, four such jobs would need a period of 4 s
    for iterations of 2 s: no windows for them, while two on another link, that fit,
    have theirs. Two jobs fit up to iterations of 2 s / FIT."""
    usage = {job: {"spine": 1.0} for job in range(4)}
    usage.update({4: {"other": 1.0}, 5: {"other": 1.0}})
    iterations = {job: Iteration(1.0, 2.0) for job in range(6)}
    assert set(schedule(iterations, usage)) == {4, 5}
    iterations = {job: Iteration(1.0, 2.0 / FIT + 0.01) for job in (0, 1)}
    assert set(schedule(iterations, usage)) == {0, 1}
    iterations = {job: Iteration(1.0, 2.0 / FIT - 0.01) for job in (0, 1)}
    assert schedule(iterations, usage) == {}


def test_rounds_that_must_meet_and_would_then_outrun_the_period_run_freely():
    """Three jobs that each take 0.77 of a link, computing as long as they communicate:
    their busy link fits the period (2.31 s of rounds in 2.43 s), but three rounds of
    1 s in it must meet, two at a time; at the rate that meeting leaves them (0.85 of
    the link for two: 0.55 of their rates alone), a round lasts 1.8 s, and with its
    1 s of compute outruns the period. They run freely; with compute short enough
    that a round at that rate fits, two jobs alone in their windows keep windows."""
    usage = {job: {"spine": 0.77} for job in range(3)}
    assert schedule({job: Iteration(1.0, 2.0) for job in range(3)}, usage) == {}
    assert fits_at_scale(Iteration(1.0, 2.0), 0.55, 2.43) is False
    assert fits_at_scale(Iteration(1.0, 2.0), 1.0, 2.1) is True
    pair = schedule({job: Iteration(1.0, 2.0) for job in range(2)},
                    {job: {"spine": 0.77} for job in range(2)})
    assert set(pair) == {0, 1} and all(w.rate_scale == 1.0 for w in pair.values())


def test_rounds_of_another_group_that_meet_on_a_resource_cut_the_rate_too():
    """Two groups of two jobs on links a and b; jobs 1 and 3 also share c, at half of it
    each (not contended, but past SHARED_FILL together). Their periods differ, so their
    rounds meet: both send at SHARED_FILL of their rates alone, and still fit. Where
    group {1, 2} computes too little for that in the period of its rates alone (rounds
    of 1.18 s and 1 s of compute outrun 2.1 s), it is planned again with rounds at
    SHARED_FILL: a period of 2 x 1.18 s, its margin more, in which they still fit."""
    from syncfabric.decisions.phase_schedule import SHARED_FILL
    usage = {1: {"a": 1.0, "c": 0.5}, 2: {"a": 1.0}, 3: {"b": 1.0, "c": 0.5}, 4: {"b": 1.0}}
    iterations = {1: Iteration(1.0, 4.0), 2: Iteration(1.0, 4.0),
                  3: Iteration(1.0, 5.0), 4: Iteration(1.0, 5.0)}
    windows = schedule(iterations, usage)
    assert windows[1].period_s != windows[3].period_s
    assert windows[1].rate_scale == windows[3].rate_scale == pytest.approx(SHARED_FILL)
    assert windows[2].rate_scale == windows[4].rate_scale == 1.0
    iterations.update({1: Iteration(1.0, 2.0), 2: Iteration(1.0, 2.0)})
    windows = schedule(iterations, usage)
    assert set(windows) == {1, 2, 3, 4}
    assert windows[1].period_s == pytest.approx(2.0 / SHARED_FILL * (1 + PERIOD_MARGIN))
    assert windows[1].comm_s == pytest.approx(1.0 / SHARED_FILL)
    assert windows[1].rate_scale == windows[3].rate_scale == pytest.approx(SHARED_FILL)
    assert overflow(windows, usage) == 0


def test_four_jobs_that_each_take_half_a_link_meet_in_pairs_at_shared_fill():
    """Four jobs that each take half of a link, computing a little less than they
    communicate (the tenants benchmark on 2x4x4): at their rates alone, rounds of 1 s
    in a period of 2.1 s meet in threes, and at the rate that leaves them they outrun
    it. Planned at SHARED_FILL, they meet in pairs (each pair filling the link to
    SHARED_FILL), the pairs apart, in a period of two such rounds; three jobs that
    each take 0.77 of it may not meet even in pairs, and run freely."""
    from syncfabric.decisions.phase_schedule import SHARED_FILL, shared_scale
    usage = {job: {"spine": 0.5} for job in range(4)}
    windows = schedule({job: Iteration(1.0, 1.9) for job in range(4)}, usage)
    assert set(windows) == {0, 1, 2, 3}
    assert windows[0].period_s == pytest.approx(2.0 / SHARED_FILL * (1 + PERIOD_MARGIN))
    assert all(w.rate_scale == pytest.approx(SHARED_FILL) for w in windows.values())
    offsets = sorted(round(w.phase_offset_s, 6) for w in windows.values())
    assert offsets[0] == offsets[1] and offsets[2] == offsets[3] != offsets[0]
    assert overflow(windows, usage) == 0
    assert all(shared_scale(job, usage, windows) == pytest.approx(SHARED_FILL) for job in usage)
    usage = {job: {"spine": 0.77} for job in range(3)}
    assert schedule({job: Iteration(1.0, 1.9) for job in range(3)}, usage) == {}


def test_jobs_that_fit_together_or_apart_get_no_window():
    """Two jobs each taking half of a link are not contended; a job on its own links is
    in no group."""
    iterations = {1: Iteration(1.0, 2.0), 2: Iteration(1.0, 2.0), 3: Iteration(1.0, 2.0)}
    usage = {1: {"a": 0.5}, 2: {"a": 0.5}, 3: {"b": 1.0}}
    assert schedule(iterations, usage) == {}


def test_groups_have_their_own_periods():
    iterations = {1: Iteration(1.0, 2.0), 2: Iteration(1.0, 2.0),
                  3: Iteration(3.0, 5.0), 4: Iteration(1.0, 5.0)}
    usage = {1: {"a": 1.0}, 2: {"a": 1.0}, 3: {"b": 1.0}, 4: {"b": 1.0}}
    windows = schedule(iterations, usage)
    assert windows[1].period_s == pytest.approx(2.0 * (1 + PERIOD_MARGIN))
    assert windows[3].period_s == pytest.approx(5.0 * (1 + PERIOD_MARGIN))


@pytest.mark.parametrize("seed", range(40))
def test_the_greedy_against_a_brute_force(seed):
    """Three or four jobs on three links, random rounds and fractions: the greedy's
    overflow is the brute force's wherever that is none, and never more than a tenth
    of the period above it."""
    rng = random.Random(seed)
    jobs = range(rng.choice((3, 4)))
    iterations = {job: Iteration(rng.uniform(0.5, 2.0), 0.0) for job in jobs}
    iterations = {job: Iteration(it.comm_s, it.comm_s * rng.uniform(1.5, 4.0))
                  for job, it in iterations.items()}
    usage = {job: {link: rng.choice((0.4, 0.6, 1.0))
                   for link in rng.sample("abc", rng.choice((1, 2)))}
             for job in jobs}
    windows = schedule(iterations, usage)
    if not windows:
        return
    period = max(window.period_s for window in windows.values())
    best = brute_force_overflow(iterations, usage, windows)
    greedy = overflow(windows, usage)
    if best == 0:
        assert greedy == pytest.approx(0, abs=1e-9)
    assert greedy <= best + 0.1 * period


def test_a_job_planned_again_keeps_its_place_where_it_does_as_well():
    """Two jobs whose places were swapped before keep them, scaled to the new period."""
    usage = {1: {"spine": 1.0}, 2: {"spine": 1.0}}
    period = 2.0 * (1 + PERIOD_MARGIN)
    previous = {1: Window(4.0, 2.0, 1.0), 2: Window(4.0, 0.0, 1.0)}
    windows = schedule({job: Iteration(1.0, 2.0) for job in (1, 2)}, usage, previous)
    assert windows[1].phase_offset_s == pytest.approx(period / 2)
    assert windows[2].phase_offset_s == pytest.approx(0.0)
    fresh = schedule({job: Iteration(1.0, 2.0) for job in (1, 2)}, usage)
    assert fresh[1].phase_offset_s == 0.0   # without: the first by id at the start


def test_windows_of_one_period_that_never_meet_are_apart():
    """A job's rounds run beside another's unless both have windows in one period that
    do not meet on its circle (a window lasts its round and PERIOD_MARGIN more)."""
    from types import SimpleNamespace

    from syncfabric.decisions.phase_schedule import apart
    from syncfabric.services.job_phases import JobPhases
    first = Window(4.0, 0.0, 1.5)
    assert apart(first, Window(4.0, 2.0, 1.5))
    assert apart(first, Window(4.0, 1.6, 2.2))                # from 1.6 to 3.91
    assert not apart(first, Window(4.0, 1.5, 1.5))             # first's margin reaches it
    assert not apart(first, Window(4.0, 3.0, 1.5))             # it wraps into first's
    assert not apart(first, Window(5.0, 2.0, 1.5))             # another period
    assert not apart(first, None)                              # it runs freely
    phases = JobPhases(SimpleNamespace())
    phases.windows = {1: first, 2: Window(4.0, 2.0, 1.5), 3: Window(4.0, 0.5, 1.0)}
    assert phases.co_active(1, [2, 3, 4]) == [3, 4]
    assert phases.co_active(4, [1, 2]) == [1, 2]               # without a window: all


def test_jobs_whose_windows_meet_fill_what_they_share_to_shared_fill_at_most():
    """A window's rate is the job's rate alone, less where jobs whose windows meet it
    share a resource with it that they would fill past SHARED_FILL at their rates alone;
    a job alone in its window, or sharing nothing with those it meets, keeps it."""
    from syncfabric.decisions.phase_schedule import SHARED_FILL, shared_scale
    windows = {1: Window(4.0, 0.0, 1.5), 2: Window(4.0, 0.0, 1.5), 3: Window(4.0, 2.0, 1.5),
               4: Window(4.0, 2.0, 1.5)}
    usage = {1: {"spine": 0.5, "h1": 1.0}, 2: {"spine": 0.5, "h2": 1.0},
             3: {"spine": 0.6, "h3": 1.0}, 4: {"h4": 1.0}}
    assert shared_scale(1, usage, windows) == pytest.approx(SHARED_FILL / 1.0)
    assert shared_scale(2, usage, windows) == pytest.approx(SHARED_FILL)
    assert shared_scale(3, usage, windows) == 1.0   # job 4 meets it, sharing nothing
    assert shared_scale(4, usage, windows) == 1.0   # its own link, filled whole alone
    windows[3] = Window(4.0, 1.55, 1.5)             # meets job 1 in job 1's margin only
    assert shared_scale(3, usage, windows) == 1.0
    usage[2]["spine"] = 0.3                         # 0.8 together: below the fill
    assert shared_scale(1, usage, windows) == 1.0


def test_a_job_that_runs_freely_logs_what_it_shares_not_its_own_links(caplog):
    """Its own host links, which its rate alone fills, say nothing about why it has no
    window: the log names the resources it shares, with all jobs' fractions there."""
    from syncfabric.services.job_phases import log_plan
    usage = {1: {"h1": 1.0, "uplink": 0.5, "spine": 0.25}, 2: {"h2": 1.0, "uplink": 0.75}}
    with caplog.at_level("INFO", logger="syncfabric.jobs"):
        log_plan({}, {}, {job: Iteration(1.0, 2.0) for job in (1, 2)}, usage)
    assert "job 1 runs freely" in caplog.text and "0.50 of uplink (all jobs 1.25)" in caplog.text
    assert "h1" not in caplog.text and "spine" not in caplog.text
