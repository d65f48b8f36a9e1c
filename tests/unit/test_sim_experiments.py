"""The simulated experiments' commands, on small settings: their CSV, figure and
printed figures (no Mininet)."""

import json

import pytest

from tests.harness.experiments import rows, run


def test_ps_multicast_sweeps_workers_and_jobs(tmp_path):
    out = tmp_path / "ps.csv"
    answer = run("sim.ps_multicast", "--fabrics", "2x4", "--hosts-per-leaf", "4",
                 "--workers", "3,15", "--jobs", "1,4", "--job-workers", "3", "--out", str(out))
    assert answer.returncode == 0, answer.stderr[-2000:]
    table = rows(out)
    assert {(r["sweep"], r["mode"], r["workers"], r["jobs"]) for r in table} == {
        (sweep, mode, workers, jobs) for mode in ("unicast", "random", "path-aware")
        for sweep, workers, jobs in (("workers", "3", "1"), ("workers", "15", "1"),
                                     ("jobs", "3", "1"), ("jobs", "3", "4"))}
    unicast, aware = ({r["mode"]: float(r["completion_s"]) for r in table
                       if r["sweep"] == "workers" and r["workers"] == "15"}[m]
                      for m in ("unicast", "path-aware"))
    # 15 copies of 800 Mbit through the PS's 100 Gbit/s link; one tree at 95 Gbit/s
    assert unicast == pytest.approx(15 * 800 / 100e3, rel=1e-4)
    assert aware == pytest.approx(800 / 95e3, rel=1e-4)
    assert "15 workers: unicast" in answer.stdout
    assert out.with_suffix(".png").stat().st_size > 0


def test_ps_multicast_bench_prints_one_json_object():
    answer = run("sim.ps_multicast", "--bench")
    assert answer.returncode == 0, answer.stderr[-2000:]
    result = json.loads(answer.stdout)
    assert result["workers"] == 1000 and result["fabric"] == "64x64" and result["flows"] == 1
    assert 0 < result["sim_s"] < 60


def test_selmcast_sweeps_n_and_lambda_for_bsp_and_ssp(tmp_path):
    out = tmp_path / "selmcast.csv"
    answer = run("sim.selmcast", "--n", "10,20", "--lams", "0.2,0.6", "--lam-n", "10",
                 "--ssp-n", "10", "--trials", "1", "--ssp-trials", "1", "--ssp-iterations", "3",
                 "--out", str(out))
    assert answer.returncode == 0, answer.stderr[-2000:]
    table = rows(out)
    assert {(r["sweep"], r["sync"]) for r in table} == {("n", "bsp"), ("lam", "bsp"),
                                                         ("n", "ssp"), ("lam", "ssp")}
    assert all(float(r["normalized_completion"]) >= 1 - 1e-9 for r in table if r["sync"] == "bsp")
    assert all(0 < float(r["multicast_scale"]) <= 1 for r in table)
    assert out.with_suffix(".png").stat().st_size > 0


def test_ina_plans_agree_with_the_simulator_with_and_without_the_papers_links(tmp_path):
    out = tmp_path / "ina.csv"
    answer = run("sim.ina", "--grid-workers", "6", "--inart-workers", "6", "--inart-ps", "2",
                 "--links", "counted,paper", "--out", str(out))
    assert answer.returncode == 0, answer.stderr[-2000:]
    table = rows(out)
    # 2 link models x 2 fabrics x 2 settings x 6 GRID policies; 4 InArt ones
    assert len(table) == 2 * 4 * 6 + 4
    for row in table:
        assert float(row["sim_rate_mbps"]) == pytest.approx(float(row["rate_mbps"]), rel=1e-3)
        assert float(row["optimality_gap"]) >= 0
    rate = {(r["fabric"], r["programmable"], r["links"], r["policy"]): float(r["rate_mbps"])
            for r in table if r["part"] == "grid"}
    counted = {policy: value for (fabric, programmable, links, policy), value in rate.items()
               if (fabric, programmable, links) == ("fattree", "tor", "counted")}
    assert counted["grid"] >= max(counted.values()) - 1e-6
    for (fabric, programmable, links, policy), value in rate.items():
        if links == "paper":   # fewer constraints never lower a rate
            assert value >= rate[fabric, programmable, "counted", policy] * (1 - 1e-6)
    # with links unbounded the fat-tree's ToR aggregation is held by the PS's ingress only
    assert rate["fattree", "tor", "paper", "grid"] > 1.5 * counted["grid"]
    assert out.with_suffix(".png").stat().st_size > 0
