"""The sender's rate against recorded loss feedback, and loss from progress reports."""

import pytest

from syncfabric.hosts.transport.rate_control import (BACKOFF, HOLD_S, INTERVAL_S, PROBE_STEP,
                                           LossAdaptiveRate, ReceiverLoss)

# Worst-receiver loss every 0.1 s, as a 19 Mbit/s tree on an overloaded 8x8 reported it:
# a third lost at the reserved rate, less as the sender backs off, little once it fits
# (loss under the target keeps the sender probing).
OVERLOADED = [0.36, 0.34, 0.30, 0.12, 0.03, 0.0, 0.0, 0.0, 0.0, 0.005, 0.0, 0.0]


def test_clean_feedback_keeps_the_reservation():
    rate = LossAdaptiveRate(19.0)
    for step in range(20):
        assert rate.update(0.0, step * 0.1) == 19.0


def test_loss_backs_off_to_what_got_through_then_holds():
    rate = LossAdaptiveRate(19.0)
    assert rate.update(0.36, 0.0) == pytest.approx(19.0 * 0.64 * BACKOFF)
    # feedback about packets sent before the drop changes nothing during the hold
    assert rate.update(0.34, HOLD_S / 2) == pytest.approx(19.0 * 0.64 * BACKOFF)
    assert rate.update(0.30, HOLD_S) == pytest.approx(19.0 * 0.64 * 0.70 * BACKOFF ** 2)


def test_recorded_overload_settles_below_the_reservation_and_probes_back():
    rate = LossAdaptiveRate(19.0)
    rates = [rate.update(loss, step * 0.1) for step, loss in enumerate(OVERLOADED)]
    assert min(rates) < 19.0 * 0.6 and rate.lowest == min(rates)
    # after the last loss the rate climbs by one step per clean report, never past 19
    assert rates[-1] == pytest.approx(rates[-2] + PROBE_STEP * 19.0)
    later = [rate.update(0.0, 2 + step * 0.1) for step in range(40)]
    assert max(later) == 19.0


def test_the_rate_never_falls_to_nothing():
    rate = LossAdaptiveRate(10.0)
    for step in range(50):
        rate.update(0.9, step)
    assert rate.rate > 0


def test_many_receivers_in_one_interval_count_once_by_the_worst():
    rate = LossAdaptiveRate(10.0, start_mbps=5.0)
    for receiver in range(15):      # 15 clean reports within one interval
        rate.report(0.0, receiver * INTERVAL_S / 20)
    assert rate.rate == 5.0
    assert rate.report(0.0, INTERVAL_S) == pytest.approx(5.0 + PROBE_STEP * 10)
    rate.report(0.0, 2 * INTERVAL_S)
    rate.report(0.2, 2.5 * INTERVAL_S)   # one lossy receiver among clean ones
    assert rate.report(0.0, 3 * INTERVAL_S) < 6.0


def test_a_stall_at_most_halves_the_rate():
    rate = LossAdaptiveRate(10.0)
    assert rate.update(0.8, 0.0) == 5.0


def test_receiver_loss_from_progress_reports():
    losses = ReceiverLoss(range(1000))
    assert losses.report("h2", 30, 39) is None                  # too little sent to tell
    assert losses.report("h2", 90, 99) == pytest.approx(0.1)    # 90 of the first 100
    assert losses.report("h2", 190, 199) == pytest.approx(0.0)  # all 100 of the next
    repair = ReceiverLoss(list(range(0, 400, 2)))               # every other chunk again
    assert repair.report("h3", 50, 199) == pytest.approx(0.5)   # 50 of the first 100 sent
    with pytest.raises(ValueError):
        ReceiverLoss([5, 3])
