"""Figures are chosen by the experiment's name, and every legend tells its lines apart."""

import csv
import subprocess
import sys

import matplotlib.pyplot as plt

from experiments.plots import selmcast
from experiments.plots.selmcast import plot_sim_selmcast


def sim_selmcast_csv(path):
    rows = []
    for sweep, values in (("n", (10, 20)), ("lam", (0.25, 0.5))):
        for sync in ("bsp", "ssp"):
            for cost_model in ("L3", "L7"):
                for policy in ("selmcast", "random"):
                    for value in values:
                        rows.append({"sweep": sweep, "sync": sync, "cost_model": cost_model,
                                     "policy": policy, "n": value if sweep == "n" else 10,
                                     "lam": value if sweep == "lam" else 0.5,
                                     "normalized_completion": 1.0 + value / 100,
                                     "multicast_scale": 0.3 + value / 100})
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_every_line_of_the_sim_selmcast_legend_looks_different(tmp_path, monkeypatch):
    figures = []
    monkeypatch.setattr(selmcast, "save", lambda figure, _path: figures.append(figure))
    plot_sim_selmcast(sim_selmcast_csv(tmp_path / "sim_selmcast.csv"))
    for axes in figures[0].axes:
        looks = [(line.get_color(), line.get_marker(), line.get_markerfacecolor(),
                  line.get_linestyle()) for line in axes.get_lines()]
        assert len(looks) > 2 and len(set(looks)) == len(looks), looks
    plt.close(figures[0])


def test_the_figure_is_chosen_by_the_experiment_s_name(tmp_path):
    path = sim_selmcast_csv(tmp_path / "rows.csv")
    answer = subprocess.run([sys.executable, "-m", "experiments.plots", "sim.selmcast", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert answer.returncode == 0, answer.stderr
    assert (tmp_path / "rows.png").exists() and answer.stdout.strip().endswith("rows.png")
    wrong = subprocess.run([sys.executable, "-m", "experiments.plots", "sim-selmcast", str(path)],
                           capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 2 and len(wrong.stderr.strip().splitlines()) == 1
