"""The fidelity verdict on canned measurements, the calibration's traffic patterns and
--bw auto."""

import json
import math

import pytest

from experiments import fidelity
from experiments.calibrate import streams, trial_clean
from experiments.fidelity import Usage, verdict
from experiments.platform_capacity import NotCalibrated, resolve_bw
from tests.harness.experiments import kept_up_or_busy

IDLE = Usage(ovs_cpu=0.5, machine_busy=0.6)


def test_a_run_that_kept_up_is_faithful():
    row = verdict(8.075, 8.05, 0.0, 0, IDLE)
    assert row["fidelity_ok"] and row["fidelity_reason"] == "kept up"
    assert row["rate_ratio"] == pytest.approx(0.997, abs=1e-3)


def test_each_invariant_decides_alone():
    slow = verdict(19.0, 9.0, 0.0, 0, IDLE)
    assert not slow["fidelity_ok"] and "47% of the planned rate" in slow["fidelity_reason"]
    lossy = verdict(8.0, 8.0, 0.03, 300, IDLE)
    assert not lossy["fidelity_ok"] and "3.00% first-pass loss" in lossy["fidelity_reason"]
    pegged = verdict(8.0, 8.0, 0.0, 0, Usage(ovs_cpu=0.99, machine_busy=0.5))
    assert not pegged["fidelity_ok"] and "ovs-vswitchd at 99%" in pegged["fidelity_reason"]
    busy = verdict(8.0, 8.0, 0.0, 0, Usage(ovs_cpu=0.5, machine_busy=0.99))
    assert not busy["fidelity_ok"] and "machine 99% busy" in busy["fidelity_reason"]
    queued = verdict(8.0, 8.0, 0.0, 0, Usage(ovs_cpu=0.5, machine_busy=0.5, ovs_backlog_kb=2048))
    assert not queued["fidelity_ok"] and queued["ovs_backlog_kb"] == 2048
    assert verdict(8.0, 8.0, 0.0, 0, Usage(ovs_backlog_kb=357.5))["fidelity_ok"]   # 22 frames
    assert "2048 KB waited for ovs-vswitchd" in queued["fidelity_reason"]
    assert Usage.worst([Usage(ovs_backlog_kb=2048), IDLE]).ovs_backlog_kb == 2048


def test_a_test_excuses_a_row_by_its_machine_busy_column_alone():
    """kept_up_or_busy reads the verdict's columns as a CSV gives them (text)."""
    def as_csv(row):
        return {name: str(value) for name, value in row.items()}
    assert kept_up_or_busy(as_csv(verdict(8.0, 8.0, 0.0, 0, IDLE)))
    assert kept_up_or_busy(as_csv(verdict(19.0, 9.0, 0.0, 0, Usage(machine_busy=0.99))))
    slow = as_csv(verdict(19.0, 9.0, 0.0, 0, IDLE))
    assert not kept_up_or_busy(slow)
    assert not kept_up_or_busy(dict(slow, fidelity_reason="the machine was busy elsewhere"))


def test_a_round_is_judged_by_the_backlog_while_it_ran():
    from experiments.traffic.jobs import job_round_fidelity, job_rounds
    line = {"sent": 100, "resent": 0, "repair_requests": 0, "first_pass_s": 0.5,
            "planned_first_pass_s": 0.5, "exact": True}
    lines = {"h1": [dict(line, round=1, started_at=100.0, seconds=1.0, generation=1),
                    dict(line, round=2, started_at=101.0, seconds=0.9, generation=2)],
             "h2": [dict(line, round=1, started_at=100.05, seconds=0.95, generation=1),
                    dict(line, round=2, started_at=101.02, seconds=0.99, generation=1)]}
    first, second = job_rounds(lines)
    assert (first["started_at"], first["ended_at"], first["comm_s"]) == (100.0, 101.0, 1.0)
    assert second["generation"] == 1   # h2 read generation 2 too late for its round 2
    assert (second["started_at"], second["ended_at"]) == (101.0, pytest.approx(102.01))
    # 650 KB waited for OVS in the first round's first half only
    run = Usage(ovs_cpu=0.5, machine_busy=0.5, ovs_backlog_kb=650,
                backlog=[(100.3, 650 * 1024), (101.5, 100 * 1024), (103.0, 900 * 1024)])
    assert not verdict(8.0, 8.0, 0.0, 0, run)["fidelity_ok"]
    flagged, kept_up = (job_round_fidelity(r, run.during(r["started_at"], r["ended_at"]))
                        for r in (first, second))
    assert not flagged["fidelity_ok"] and "650 KB waited" in flagged["fidelity_reason"]
    assert kept_up["fidelity_ok"] and kept_up["ovs_backlog_kb"] == 100
    assert run.during(102.1, 102.9).ovs_backlog_kb == 0   # no sample between: none waited
    assert Usage(ovs_backlog_kb=650).during(101.0, 102.0).ovs_backlog_kb == 650   # no samples
    both = Usage.worst([run, Usage(backlog=[(101.6, 700 * 1024)])])
    assert both.during(101.0, 102.0).ovs_backlog_kb == 700


def test_loss_that_counters_explain_is_not_the_emulators():
    dropped = Usage(ovs_cpu=0.5, machine_busy=0.5, drops={"meter": 300, "qdisc": 0, "host-socket": 0})
    row = verdict(8.0, 8.0, 0.03, 300, dropped)
    assert row["fidelity_ok"] and row["unexplained_loss"] == 0.0
    half = verdict(8.0, 8.0, 0.03, 600, dropped)
    assert not half["fidelity_ok"] and half["unexplained_loss"] == pytest.approx(0.015)


def test_tcp_rows_are_held_to_their_rate_only():
    row = verdict(8.5, 8.1, None, 0, IDLE)
    assert row["fidelity_ok"] and row["unexplained_loss"] is None


def test_summaries_use_faithful_rows_only():
    rows = [{"t": 1.0, "fidelity_ok": "True", "fidelity_reason": "kept up"},
            {"t": 9.0, "fidelity_ok": "False", "fidelity_reason": "machine 99% busy"},
            {"t": 3.0, "fidelity_ok": True, "fidelity_reason": "kept up"}]
    assert fidelity.faithful_median(rows, "t") == 2.0
    assert fidelity.faithful_median(rows[1:2], "t") is None
    assert fidelity.unfaithful_note(rows).startswith("1 of 3 rows not faithful")
    assert fidelity.unfaithful_note(rows[:1]) == ""


HOSTS = ["h%d" % i for i in range(1, 5)]
IPS = {name: "10.0.0.%d" % i for i, name in enumerate(HOSTS, start=1)}


def test_calibration_patterns_fill_every_host_link_at_most_once():
    plan, receivers = streams("multicast", HOSTS, IPS, 10.0, group="239.1.0.1")
    assert plan["h1"] == ([["239.1.0.1", 9.5]], []) and plan["h2"] == ([], ["239.1.0.1"])
    assert receivers == {("h1", "239.1.0.1"): ["h2", "h3", "h4"]}
    plan, receivers = streams("all-to-one", HOSTS, IPS, 10.0)
    assert sum(rate for name in HOSTS for _a, rate in plan[name][0]) == pytest.approx(9.5)
    assert all(receiver == ["h1"] for receiver in receivers.values())
    plan, receivers = streams("all-to-all", HOSTS, IPS, 10.0)
    for name in HOSTS:
        assert sum(rate for _a, rate in plan[name][0]) == pytest.approx(9.5)
    assert len(receivers) == 12


def test_bw_auto_is_a_safe_fraction_of_the_calibrated_rate(tmp_path):
    platform = tmp_path / "platform.json"
    with pytest.raises(NotCalibrated, match="make calibrate"):
        resolve_bw("auto", "multicast", platform)
    assert resolve_bw(20.0, "multicast", platform) == (20.0, None)   # nothing to compare with
    platform.write_text(json.dumps({"date": "2026-11-23T12:00:00+00:00", "mtu": 1500}))
    with pytest.raises(NotCalibrated, match="calibrated at MTU 1500, and the fabric now runs at 9000"):
        resolve_bw("auto", "multicast", platform)
    platform.write_text(json.dumps({
        "date": "2026-11-23T12:00:00+00:00", "machine": {"cpu": "AMD EPYC"}, "mtu": 9000,
        "patterns": {"multicast": {"max_mbps": 10.62}, "all-to-all": {"max_mbps": 5.62}}}))
    rate, note = resolve_bw("auto", "multicast", platform)
    assert rate == 7.4 and "10.62 Mbit/s calibrated for multicast" in note
    assert resolve_bw("auto", "all-to-all", platform)[0] == 3.9
    assert resolve_bw(8.0, "multicast", platform) == (8.0, None)
    rate, warning = resolve_bw(20.0, "multicast", platform)
    assert rate == 20.0 and warning.startswith("warning: --bw 20 is above the 10.62")


def test_an_emulated_figure_names_its_link_rate_and_faithful_rows(tmp_path):
    from experiments.plots.files import emulation_footer, read_rows
    from experiments.plots.multicast import plot_ps_distribution
    path = tmp_path / "dist.csv"
    path.write_text(
        "mode,workers,model_mb,completion_s,line_rate_s,link_mbps,fidelity_ok\n"
        "unicast,3,1.0,3.1,1.0,8.0,True\npath-aware,3,1.0,1.1,1.0,8.0,True\n"
        "path-aware,3,1.0,9.0,1.0,8.0,False\n")
    assert emulation_footer(read_rows(path)) == (
        "links 8.0 Mbit/s (emulated; seconds are this machine's); 2 of 3 rows faithful")
    assert plot_ps_distribution(path).stat().st_size > 0


def test_the_largest_all_to_all_shares_out_what_the_calibrated_fabric_carried(tmp_path):
    from experiments.platform_capacity import capacity_warning, largest_all_to_all
    platform = {"date": "2026-11-25T14:00:00+00:00", "mtu": 9000, "hosts": 16,
                "patterns": {"all-to-all": {"max_mbps": 60.0}}}
    assert largest_all_to_all(platform, 42.0) == 16 and largest_all_to_all(platform, 21.0) == 32
    path = tmp_path / "platform.json"
    path.write_text(json.dumps(platform))
    assert capacity_warning(21.0, 32, path) is None
    warning = capacity_warning(42.0, 32, path)
    assert warning.startswith("warning: 32 hosts at 42 Mbit/s are more than the 16")
    assert "a --bw of at most 21.0" in warning
    assert capacity_warning(42.0, 32, tmp_path / "missing.json") is None


def test_bw_auto_is_lowered_until_the_runs_largest_job_fits_the_machine(tmp_path, monkeypatch):
    from experiments import allreduce, ddp, platform_capacity
    from experiments.platform_capacity import fitting_rate
    path = tmp_path / "platform.json"
    path.write_text(json.dumps({"date": "2026-11-25T14:00:00+00:00", "mtu": 9000, "hosts": 4,
                                "machine": {"cpu": "AMD EPYC"},
                                "patterns": {"all-to-all": {"max_mbps": 60.0}}}))
    assert fitting_rate(42.0, 168.0, path) == (42.0, None)   # 0.7 x 4 x 60 = 168 Mbit/s of flows
    assert fitting_rate(42.0, 400.0, path) == (17.6, "400 Mbit/s of flows at 42 Mbit/s, more "
                                                     "than the 168 this machine carries cleanly")
    monkeypatch.setattr(platform_capacity, "PLATFORM_FILE", path)
    flags = ["--spines", "2", "--leaves", "2", "--hosts-per-leaf", "4", "--workers", "4"]
    args = allreduce.parse_args(flags + ["--modes", "gloo-allreduce", "--aggregator-bw", "1x"])
    assert args.bw == 42.0 and args.aggregator_bw == [42.0] and "lowered" not in args.bw_note
    args = allreduce.parse_args(flags + ["--modes", "gloo-allreduce,stream", "--aggregator-bw", "1x"])
    lowered, note = args.bw, args.bw_note
    assert args.aggregator_bw == [lowered] and "lowered to %g Mbit/s" % lowered in note
    args.bw, args.aggregator_bw = 42.0, ["1x"]   # the round planned at the rate auto gave
    assert lowered == math.floor(42 * 168 / allreduce.heaviest_round(args) * 10) / 10 < 42
    assert allreduce.parse_args(flags + ["--modes", "stream", "--bw", "42"]).bw == 42.0   # kept
    args = ddp.parse_args(flags + ["--models", "mlp", "--modes", "gloo,fabric-stream"])
    lowered = args.bw
    args.bw = 42.0
    assert lowered == math.floor(42 * 168 / ddp.heaviest_job(args, 42.0) * 10) / 10 < 42


def test_a_job_is_warned_of_by_its_flows(tmp_path, monkeypatch, capsys):
    from experiments import platform_capacity
    from experiments.traffic.jobs import job_servers, report_load_mbps, warn_over_capacity
    path = tmp_path / "platform.json"
    path.write_text(json.dumps({"date": "2026-11-25T14:00:00+00:00", "mtu": 9000, "hosts": 16,
                                "patterns": {"all-to-all": {"max_mbps": 60.0}}}))
    monkeypatch.setattr(platform_capacity, "PLATFORM_FILE", path)   # 672 Mbit/s of flows
    workers = ["h%d" % i for i in range(1, 11)]
    job = {"workers": workers, "destinations": {w: [{"rate_mbps": 42.0}] for w in workers},
           "shards": [{"host": h, "return": {"rate_mbps": 6.0, "trees": [
                          {"receivers": [w for w in workers if w != h]}]}}
                      for h in ["h1"] + ["h%d" % i for i in range(11, 17)]],
           "aggregators": [{"host": "agg1", "rate_mbps": 6.0}, {"host": "h11", "rate_mbps": 6.0}]}
    assert job_servers(job) == ["agg1", "h11", "h12", "h13", "h14", "h15", "h16"]
    # legs 10 x 42, aggregates 2 x 6, returns 6 x 9 (h1 sums its own) and 6 x 6 x 10
    assert report_load_mbps(job) == 420 + 12 + 54 + 360
    warn_over_capacity(job, 42.0)
    assert capsys.readouterr().err == (
        "warning: the job of 10 workers and 7 servers puts 846 Mbit/s of flows at 42 Mbit/s, "
        "more than the 672 this machine carries cleanly: give a --bw of at most 33.3, or "
        "expect rows flagged not faithful, or rounds slowed by the machine\n")
    warn_over_capacity(dict(job, shards=job["shards"][:1]), 42.0)   # 486 Mbit/s
    warn_over_capacity(job, None)
    monkeypatch.setattr(platform_capacity, "PLATFORM_FILE", tmp_path / "missing.json")
    warn_over_capacity(job, 42.0)
    assert capsys.readouterr().err == ""


def test_a_jobs_flows_count_alike_from_its_plan_and_from_the_controllers_answer():
    from experiments.traffic.jobs import planned_load_mbps, report_load_mbps, stream_job
    from syncfabric.decisions.fabric_view import FabricView
    from tests.harness.fake_controller import InProcessController, description
    from tests.harness.in_process import post
    fabric = description(hosts_per_leaf=3)
    view = FabricView(fabric)
    hosts = sorted((h for h in view.hosts if not view.is_aggregator(h)), key=lambda h: int(h[1:]))
    for placement in ("dedicated", "colocated", "in-network"):
        controller = InProcessController(fabric)
        try:
            planned = planned_load_mbps(view, hosts[:4], hosts[4:], 250_000, 16, placement)
            code, job = post(controller, "/jobs",
                             stream_job(view, hosts[:4], hosts[4:], 250_000, 16, placement))
            assert code == 201 and report_load_mbps(job) == pytest.approx(planned) and planned > 0
        finally:
            controller.close()


def test_a_multicast_trials_drops_explain_what_its_worst_receiver_missed():
    from experiments.calibrate import trial_loss
    plan, receivers = streams("multicast", HOSTS, IPS, 10.0, group="239.1.0.1")
    sent = {"h1": [100], "h2": [], "h3": [], "h4": []}
    received = {"h1": {}, "h2": {"0": 90}, "h3": {"0": 90}, "h4": {"0": 100}}
    loss, distinct, worst = trial_loss(plan, receivers, sent, received, HOSTS)
    assert (loss, distinct, worst) == (pytest.approx(20 / 300), 10, 0.1)
    # ten drops before the branch explain all twenty missed deliveries; five do not
    assert fidelity.unexplained_loss(loss, distinct, Usage(drops={"ovs-receive": 10})) == 0.0
    assert fidelity.unexplained_loss(loss, distinct, Usage(drops={"ovs-receive": 5})) == \
        pytest.approx(10 / 300)
    plan, receivers = streams("all-to-one", HOSTS, IPS, 10.0)
    sent = {"h1": [], "h2": [50], "h3": [50], "h4": [50]}
    received = {"h1": {"1": 50, "2": 40, "3": 45}}
    assert trial_loss(plan, receivers, sent, received, HOSTS) == (pytest.approx(15 / 150), 15, 0.2)


def test_a_calibration_trial_is_clean_only_if_nothing_lost_and_nothing_waited_for_ovs():
    assert trial_clean({"loss": 0.004, "ovs_backlog_kb": 100.0}, 0.005)
    assert not trial_clean({"loss": 0.006, "ovs_backlog_kb": 100.0}, 0.005)
    # lossless, but a megabyte behind: the rows of a run at this rate would be flagged
    assert not trial_clean({"loss": 0.0, "ovs_backlog_kb": 1089.0}, 0.005)
    assert trial_clean({"loss": 0.0, "ovs_backlog_kb": fidelity.OVS_BACKLOG_MAX_KB}, 0.005)
