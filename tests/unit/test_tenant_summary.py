"""What the tenants experiment's summary computes (experiments/tenant_summary.py), on
rows made by hand: Jain's index, the spread, the rates after a departure and the
completion times, over faithful rounds only."""

import pytest

from experiments.tenant_summary import comebacks, completion_s, fairness, jain, spread, summary


def row(job, number, started_s, round_s, share=None, concurrent=2, faithful=True, left_s=100.0):
    return {"mode": "fabric-fair", "job": job, "round": number, "started_s": started_s,
            "round_s": round_s, "concurrent_jobs": concurrent, "share_mbps": share,
            "fidelity_ok": faithful, "verified": True, "model_mb": 4.0, "arrived_s": 0.0,
            "left_s": left_s, "predicted_s": round_s}


def test_jain_is_one_for_equal_shares_and_one_over_n_for_one_taker():
    assert jain([3.0, 3.0, 3.0]) == pytest.approx(1.0)
    assert jain([5.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)


def test_fairness_and_spread_count_faithful_rounds_while_every_job_ran():
    rows = [row(0, 1, 0.0, 2.0), row(1, 1, 0.0, 4.0), row(1, 2, 4.0, 40.0, faithful=False),
            row(0, 2, 2.0, 1.0, concurrent=1)]
    assert fairness(rows) == pytest.approx(jain([4.0 * 8 / 2.0, 4.0 * 8 / 4.0]))
    assert spread(rows) == pytest.approx(2.0)


def test_a_departure_shows_the_rates_before_and_a_second_after():
    rows = [row(0, 1, 0.0, 2.0, left_s=2.0), row(1, 1, 0.0, 2.0, share=5.0),
            row(1, 2, 2.5, 1.0, share=5.0), row(1, 3, 3.5, 1.0, share=10.0)]
    assert comebacks(rows) == [(0, 1, 5.0, 10.0)]
    assert completion_s(rows) == pytest.approx((2.0 + 4.5) / 2)
    assert "after job 0 left, job 1 ran at 10.00 Mbit/s (5.00 before)" in summary(rows)


def test_a_job_that_kept_to_its_floor_is_judged_against_what_its_floor_predicts():
    rows = [dict(row(0, 1, 0.0, 2.2), predicted_s=2.0, floor_only=True),
            dict(row(0, 2, 2.2, 2.0), predicted_s=2.0, floor_only=True),
            dict(row(0, 3, 4.2, 2.0, faithful=False), predicted_s=1.0, floor_only=True,
                 fidelity_reason="the emulator fell behind"),
            dict(row(0, 4, 6.2, 3.0, concurrent=1), predicted_s=1.0, floor_only=True),
            row(1, 1, 0.0, 1.0), row(1, 2, 1.0, 1.0)]
    for each in rows:
        each.update(guaranteed_dropped=0, borrowed_dropped=37)
    text = summary(rows)
    assert "fabric-fair: the switches' queues dropped 0 guaranteed and 37 borrowed" in text
    assert "job 0, its floor only beside jobs that borrow: rounds 1.05x what its floor " \
        "predicts (median; worst 1.10x)" in text
    assert "job 1, its floor only" not in text


def test_a_round_is_told_by_the_report_of_the_generation_its_workers_paced_it_at():
    """Each round takes the share of the generation its first passes went at, its latest
    read; one no read saw (generation 3, replaced within a watch) the nearest read's, the
older of two;
    and the fair share the controller gave last before the round ended."""
    from experiments.traffic.tenant_jobs import ReportWatch
    watch = object.__new__(ReportWatch)   # its reads, without a controller
    watch.seen = [(10.0, {"generation": 1, "rate_mbps": 30.0, "fair_share_mbps": 30.0}),
                  (20.0, {"generation": 2, "rate_mbps": 20.0, "fair_share_mbps": 20.0}),
                  (25.0, {"generation": 2, "rate_mbps": 21.0, "fair_share_mbps": 21.0}),
                  (30.0, {"generation": 4, "rate_mbps": 10.0, "fair_share_mbps": 10.0})]
    its, then = watch.in_round(1, 22.0)   # paced at 1 though 2 was out: its worker read late
    assert its["rate_mbps"] == 30.0 and then["fair_share_mbps"] == 20.0
    assert watch.in_round(2, 26.0)[0]["rate_mbps"] == 21.0
    assert watch.in_round(3, 31.0)[0]["rate_mbps"] == 21.0
    assert watch.in_round(4, 5.0) == (watch.seen[3][1], watch.seen[0][1])
