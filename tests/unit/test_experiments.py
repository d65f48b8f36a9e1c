"""The experiment scripts end to end on a small fabric: CSV, figure, verified bytes, clean switches."""

import json
import subprocess
import sys

import pytest

from tests.harness.experiments import rows, run


def test_bench_trees_prints_one_json_object_per_case():
    answer = run("bench_trees", "--cases", "8x8", "--repeats", "2")
    assert answer.returncode == 0, answer.stderr
    (line,) = answer.stdout.strip().splitlines()
    result = json.loads(line)
    assert result["case"] == "8x8" and result["receivers"] == 63
    assert result["ours_ms"] > 0 and result["networkx_ms"] > 0


@pytest.mark.parametrize("module", ["ps_distribution", "load_balance", "bench_trees", "fabric_check",
                                    "selmcast_selection", "selmcast", "grid_example", "ina",
                                    "train", "inart_example", "fault_recovery", "soak",
                                    "sim.ps_multicast", "sim.selmcast", "sim.ina",
                                    "sim.emulation_check", "calibrate", "allreduce", "leftovers",
                                    "job_setup", "host_bench", "host_allreduce", "host_ranks",
                                    "host_profile",
                                    "namespace_fabric", "ddp", "tenants", "collectives",
                                    "traffic.ddp_training", "traffic.collective_ranks"])
def test_every_script_has_help(module):
    answer = run(module, "--help")
    assert answer.returncode == 0 and "usage:" in answer.stdout


@pytest.mark.parametrize("program", ["hosts.patterns.peer_sync", "hosts.patterns.model_transfer",
                                     "hosts.patterns.load_probe", "hosts.training.job_training",
                                     "hosts.training.gloo_peers", "hosts.training.gloo_training", "hosts.jobs.job_worker",
                                     "aggregator"])
def test_every_host_program_has_help(program):
    answer = subprocess.run([sys.executable, "-m", "syncfabric." + program, "--help"],
                            capture_output=True, text=True, timeout=60)
    assert answer.returncode == 0 and "usage:" in answer.stdout, answer.stderr


def test_bad_experiment_arguments_are_one_line_errors():
    answer = run("ps_distribution", "--workers", "99")
    assert answer.returncode == 2 and len(answer.stderr.strip().splitlines()) == 1
    assert "--workers must be between 1 and 15" in answer.stderr
    answer = run("ps_distribution", "--modes", "broadcast")
    assert answer.returncode == 2 and "invalid comma list value" in answer.stderr


def test_selmcast_selection_prints_one_object_per_policy_and_cost_model(tmp_path):
    out = tmp_path / "sel.csv"
    answer = run("selmcast_selection", "--n", "8", "--trials", "2", "--rounds", "5", "--out", str(out))
    assert answer.returncode == 0, answer.stderr[-2000:]
    results = [json.loads(line) for line in answer.stdout.strip().splitlines()]
    assert [(r["policy"], r["cost_model"]) for r in results] == [
        (p, c) for c in ("L3", "L7") for p in ("selmcast", "random", "milp")]
    for result in results:
        assert {"policy", "cost_model", "n", "normalized_completion", "multicast_scale",
                "selection_ms"} <= set(result)
        assert result["normalized_completion"] >= 1 - 1e-9 and 0 < result["multicast_scale"] < 1
    selmcast = [r for r in results if r["policy"] == "selmcast"]
    assert all(1 - 1e-9 <= r["t_vs_milp_worst"] <= 1.02 and r["milp_rounds"] == 10 for r in selmcast)
    assert len(rows(out)) == 6 and out.with_suffix(".png").stat().st_size > 0


def test_selmcast_selection_ssp_reports_the_multicast_scale(tmp_path):
    answer = run("selmcast_selection", "--sync", "ssp", "--n", "10", "--trials", "1",
                 "--iterations", "4", "--cost-models", "L3", "--out", str(tmp_path / "ssp.csv"))
    assert answer.returncode == 0, answer.stderr[-2000:]
    results = {r["policy"]: r for r in map(json.loads, answer.stdout.strip().splitlines())}
    assert set(results) == {"selmcast", "random"}
    assert results["selmcast"]["multicast_scale"] > results["random"]["multicast_scale"]


def test_grid_example_prints_the_papers_min_rates(tmp_path):
    out = tmp_path / "grid.csv"
    answer = run("grid_example", "--out", str(out))
    assert answer.returncode == 0, answer.stderr
    rates = {r["policy"]: r["min_rate"] for r in map(json.loads, answer.stdout.strip().splitlines())}
    assert rates == pytest.approx({"no-ina": 1.0, "nearest": 2.4375, "grid": 3.0}, abs=0.01)
    assert out.with_suffix(".png").stat().st_size > 0


def test_inart_example_prints_rates_at_least_the_papers_and_the_split(tmp_path):
    out = tmp_path / "inart.csv"
    answer = run("inart_example", "--out", str(out))
    assert answer.returncode == 0, answer.stderr
    results = {r["policy"]: r for r in map(json.loads, answer.stdout.strip().splitlines())}
    assert set(results) == {"lbmm", "atp", "equal-split", "inart"}
    assert results["lbmm"]["rate"] == pytest.approx(4 / 3)
    assert results["atp"]["rate"] >= 2 and results["inart"]["rate"] >= 2.5
    assert results["inart"]["rate"] == pytest.approx(max(r["rate"] for r in results.values()))
    assert sum(results["inart"]["x"].values()) == pytest.approx(1)
    assert len(rows(out)) == 4 and out.with_suffix(".png").stat().st_size > 0


def test_ina_bench_prints_the_planning_time():
    answer = run("ina", "--bench", "--bench-repeats", "1")
    assert answer.returncode == 0, answer.stderr
    (line,) = answer.stdout.strip().splitlines()
    result = json.loads(line)
    assert result["workers"] == 100 and "64x64" in result["fabric"] and result["plan_s"] > 0
    assert result["theta_gbps"]["grid"] > result["theta_gbps"]["no-ina"]


def test_allreduce_with_every_host_a_worker_leaves_out_the_modes_that_need_one_more():
    from experiments import allreduce
    args = allreduce.parse_args(["--bw", "20", "--workers", "16,32", "--modes",
                                 "gloo-allreduce,gloo-ps,stream,stream-colocated"])
    assert allreduce.modes_for(args, 16) == args.modes
    assert allreduce.modes_for(args, 32) == ["gloo-allreduce", "stream-colocated"]
    answer = run("allreduce", "--bw", "20", "--workers", "33")
    assert answer.returncode == 2 and "between 2 and 32" in answer.stderr


def test_allreduce_at_aggregator_bw_0_builds_a_fabric_without_aggregators():
    from experiments import allreduce, cli
    args = allreduce.parse_args(["--bw", "20", "--spines", "2", "--leaves", "2", "--workers", "4",
                                 "--modes", "gloo-allreduce,stream-colocated",
                                 "--aggregator-bw", "0,1x"])
    assert args.aggregator_bw == [0.0, 20.0]
    assert cli.job_fabric(args, 0.0)[1].aggregators == {}
    assert len(allreduce.job_fabric(args, 20.0)[1].aggregators) == 2
    answer = run("allreduce", "--bw", "20", "--modes", "stream-in-network", "--aggregator-bw", "0")
    assert answer.returncode == 2 and "without aggregators" in answer.stderr
