"""The phase solver (decisions/phase_schedule.py): jobs that share a contended link get
windows that do not overlap where the period allows, checked against a brute force."""

import itertools
import random

import pytest

from syncfabric.decisions.phase_schedule import (FIT, PERIOD_MARGIN, Iteration, Window,
                                                 arc_overlap, conflicts, contended_resources,
                                                 schedule)

GRID = 24   # the brute force's offsets: the period in this many steps


def total_overlap(windows, neighbours):
    """The sum over conflicting pairs of how long their windows overlap a period, each
    times the pair's weight (conflicts)."""
    total = 0.0
    for job, others in neighbours.items():
        for other, weight in others.items():
            if str(job) < str(other):
                first, second = windows[job], windows[other]
                total += weight * arc_overlap(first.phase_offset_s, first.comm_s,
                                              second.phase_offset_s, second.comm_s,
                                              first.period_s)
    return total


def brute_force_overlap(iterations, usage, windows):
    """The least total overlap any offsets on a grid of the period give (the first job of
    each group fixed at 0: turning every circle alike changes nothing)."""
    neighbours = {job: {other: weight for other, weight in others.items() if other in windows}
                  for job, others in conflicts(iterations, usage,
                                               contended_resources(usage)).items()
                  if job in windows}   # groups whose rounds do not fit have no windows
    jobs = sorted(neighbours)
    best = None
    for offsets in itertools.product(range(GRID), repeat=len(jobs) - 1):
        trial = {job: Window(windows[job].period_s, step * windows[job].period_s / GRID,
                             iterations[job].comm_s)
                 for job, step in zip(jobs, (0,) + offsets)}
        overlap = total_overlap(trial, neighbours)
        best = overlap if best is None else min(best, overlap)
    return best, neighbours


def test_arcs_overlap_around_the_circle():
    assert arc_overlap(0, 1, 1, 1, 4) == 0
    assert arc_overlap(0, 2, 1, 2, 4) == pytest.approx(1)
    assert arc_overlap(3.5, 1, 0, 1, 4) == pytest.approx(0.5)     # wraps past the end
    assert arc_overlap(0, 9, 1, 1, 4) == pytest.approx(1)         # a whole circle
    assert arc_overlap(3, 2, 0.5, 1, 4) == pytest.approx(0.5)


def test_jobs_on_one_link_take_turns():
    iterations = {job: Iteration(1.0, 2.0) for job in (1, 2)}
    windows = schedule(iterations, {1: {"spine": 1.0}, 2: {"spine": 1.0}})
    assert windows[1].period_s == pytest.approx(2.0 * (1 + PERIOD_MARGIN))
    assert windows[1].period_s == windows[2].period_s
    assert arc_overlap(windows[1].phase_offset_s, 1.0, windows[2].phase_offset_s, 1.0,
                       windows[1].period_s) == 0


def test_the_period_grows_to_the_busiest_link():
    """Four jobs whose rounds need a link whole, computing three times as long as they
    communicate, and a little longer: their period is four rounds, and no two windows
    overlap."""
    iterations = {job: Iteration(1.0, 3.5) for job in range(4)}
    windows = schedule(iterations, {job: {"spine": 1.0} for job in range(4)})
    assert windows[0].period_s == pytest.approx(4.0 * (1 + PERIOD_MARGIN))
    neighbours = conflicts(iterations, {job: {"spine": 1.0} for job in range(4)}, {"spine"})
    assert total_overlap(windows, neighbours) == 0


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
    """Three or four jobs on three links, random rounds and fractions: the greedy's total
    overlap is the brute force's wherever that is none, and never more than a tenth of
    the period above it."""
    rng = random.Random(seed)
    jobs = range(rng.choice((3, 4)))
    iterations = {job: Iteration(rng.uniform(0.5, 2.0), 0.0) for job in jobs}
    iterations = {job: Iteration(it.comm_s, it.comm_s * rng.uniform(1.5, 4.0))
                  for job, it in iterations.items()}
    usage = {job: {link: rng.choice((0.6, 1.0)) for link in rng.sample("abc", rng.choice((1, 2)))}
             for job in jobs}
    windows = schedule(iterations, usage)
    if not windows:
        return
    best, neighbours = brute_force_overlap(iterations, usage, windows)
    greedy = total_overlap(windows, neighbours)
    period = next(iter(windows.values())).period_s
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
