import pytest

from syncfabric.decisions.link_load import PortRates, link_report, measured_mbps
from tests.harness.fabrics import spine_leaf_view


def test_rate_is_bytes_over_switch_time():
    rates = PortRates()
    rates.update(1, 2, "tx", 1_000, 10.0)
    assert rates.rate_bps(1, 2, "tx") is None
    rates.update(1, 2, "tx", 251_000, 12.0)
    assert rates.rate_bps(1, 2, "tx") == pytest.approx(1e6)
    assert rates.rate_bps(1, 2, "rx") is None


def test_counter_reset_starts_over():
    rates = PortRates()
    rates.update(1, 2, "tx", 5_000, 10.0)
    rates.update(1, 2, "tx", 10_000, 11.0)
    rates.update(1, 2, "tx", 100, 0.5)
    assert rates.rate_bps(1, 2, "tx") is None
    rates.update(1, 2, "tx", 125_100, 1.5)
    assert rates.rate_bps(1, 2, "tx") == pytest.approx(1e6)


def test_forget_drops_one_switch():
    rates = PortRates()
    for dpid in (1, 2):
        rates.update(dpid, 1, "tx", 0, 1.0)
        rates.update(dpid, 1, "tx", 1000, 2.0)
    rates.forget(1)
    assert rates.rate_bps(1, 1, "tx") is None and rates.rate_bps(2, 1, "tx") == 8000


def test_report_reads_switch_tx_and_host_uplink_rx():
    view = spine_leaf_view(2, 2, 1, bw=20)
    rates = PortRates()
    leaf1, spine2 = view.dpid("leaf1"), view.dpid("spine2")
    for age, count in ((1.0, 0), (2.0, 1_250_000)):          # 10 Mbit/s
        rates.update(leaf1, 2, "tx", count, age)             # leaf1 -> spine2
        rates.update(leaf1, 3, "rx", count // 2, age)        # h1 -> leaf1, 5 Mbit/s
    report = {(link["src"], link["dst"]): link for link in link_report(view, rates, {("leaf1", "spine2"): 4.5})}
    assert len(report) == 12
    up = report["leaf1", "spine2"]
    assert (up["src_port"], up["dst_port"], up["kind"]) == (2, 1, "fabric")
    assert up["rate_mbps"] == pytest.approx(10) and up["utilization"] == pytest.approx(0.5)
    assert report["h1", "leaf1"]["rate_mbps"] == pytest.approx(5)
    assert report["h1", "leaf1"]["kind"] == "host"
    assert report["spine2", "leaf1"]["rate_mbps"] is None
    assert (up["reserved_mbps"], report["spine2", "leaf1"]["reserved_mbps"]) == (4.5, 0.0)
    assert set(measured_mbps(view, rates)) == {("leaf1", "spine2"), ("h1", "leaf1")}
    assert spine2 != leaf1
