"""The simulator against the emulation (tests/data, written by the commands in its
README): the same scenarios' completion times agree within 15%."""

import pytest

from experiments.sim.emulation_check import INA_CSV, PS_CSV, WORKERS, compare


def test_simulated_and_emulated_completion_times_agree_within_15_percent():
    rows = compare(PS_CSV, INA_CSV)
    assert sorted({r["scenario"] for r in rows}) == ["ina grid", "ps path-aware", "ps unicast"]
    assert len(rows) == 9   # three emulated rounds each
    for row in rows:
        assert abs(row["difference"]) <= 0.15, row


def test_the_simulated_side_is_what_the_links_allow():
    rows = {r["scenario"]: r["simulated_s"] for r in compare(PS_CSV, INA_CSV)}
    # 15 unicast copies of 40 Mbit share the PS's 20 Mbit/s link; the tree goes at 19
    assert rows["ps unicast"] == pytest.approx(WORKERS * 40 / 20, rel=1e-3)
    assert rows["ps path-aware"] == pytest.approx(40 / 19, rel=1e-3)
