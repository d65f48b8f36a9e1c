"""Figures of SELMCAST: selection policies against n and cost model, emulated rounds
against their prediction, and the simulator's BSP and SSP runs."""

import statistics
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from experiments.plots.files import read_rows, save  # noqa: E402


SELECTION_STYLE = {"selmcast": ("tab:blue", "o"), "random": ("tab:orange", "^"),
                   "milp": ("tab:green", "s")}


SYNC_COST_LINE = {("bsp", "L3"): "-", ("bsp", "L7"): "--", ("ssp", "L3"): ":",
                  ("ssp", "L7"): "-."}


def plot_selmcast_selection(csv_path):
    """Normalized completion (BSP) and multicast scale against n, per policy and cost model."""
    rows = read_rows(csv_path)
    series = defaultdict(list)
    for row in rows:
        series[row["policy"], row["cost_model"]].append(row)
    panels = [("multicast_scale", "multicast scale")]
    if rows[0]["sync"] == "bsp":
        panels.insert(0, ("normalized_completion", "completion / lower bound"))
    figure, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 3.8), squeeze=False)
    for axis, (column, label) in zip(axes[0], panels):
        for (policy, cost_model), points in sorted(series.items()):
            points.sort(key=lambda r: int(r["n"]))
            colour, marker = SELECTION_STYLE.get(policy, ("grey", "x"))
            axis.plot([int(r["n"]) for r in points], [float(r[column]) for r in points],
                      marker=marker, color=colour, linestyle="-" if cost_model == "L3" else "--",
                      label="%s %s" % (policy, cost_model))
        axis.set_xlabel("workers n")
        axis.set_ylabel(label)
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
    axes[0][-1].legend(fontsize="small")
    figure.suptitle("SELMCAST %s, p = %s n, lambda = %s" % (
        rows[0]["sync"].upper(), rows[0]["p_fraction"], rows[0]["lam"]))
    return save(figure, csv_path)


def plot_selmcast(csv_path):
    """Measured round completion next to the controller's predicted t, per policy and cost model."""
    rows = read_rows(csv_path)
    groups = defaultdict(list)
    for row in rows:
        groups["%s %s" % (row["policy"], row["cost_model"])].append(row)
    labels = sorted(groups)
    measured = [statistics.median(float(r["completion_s"]) for r in groups[k]) for k in labels]
    predicted = [statistics.median(float(r["predicted_s"]) for r in groups[k]) for k in labels]
    positions = range(len(labels))
    figure, axes = plt.subplots(figsize=(6, 4))
    axes.bar([x - 0.2 for x in positions], measured, 0.4, label="measured", color="tab:blue")
    axes.bar([x + 0.2 for x in positions], predicted, 0.4, label="predicted t", color="tab:grey")
    axes.set_xticks(list(positions), labels)
    axes.set_ylabel("round completion (s), median")
    axes.set_title("P2P sync of %s workers" % rows[0]["workers"])
    axes.grid(alpha=0.3, axis="y")
    axes.legend()
    return save(figure, csv_path)


def plot_sim_selmcast(csv_path):
    """BSP normalized completion and BSP/SSP multicast scale, against n and lambda."""
    rows = read_rows(csv_path)
    figure, grid = plt.subplots(2, 2, figsize=(11, 7))
    panels = [(grid[0][0], "n", "normalized_completion", ("bsp",)),
              (grid[0][1], "lam", "normalized_completion", ("bsp",)),
              (grid[1][0], "n", "multicast_scale", ("bsp", "ssp")),
              (grid[1][1], "lam", "multicast_scale", ("bsp", "ssp"))]
    for axes, sweep, metric, syncs in panels:
        for sync in syncs:
            for cost_model in ("L3", "L7"):
                for policy, (colour, marker) in SELECTION_STYLE.items():
                    points = sorted((float(r[sweep]), float(r[metric])) for r in rows
                                    if r["sweep"] == sweep and r["sync"] == sync
                                    and r["cost_model"] == cost_model and r["policy"] == policy
                                    and r[metric])
                    if points:   # policy: colour and marker; L7: hollow; BSP/SSP x L3/L7: line
                        axes.plot(*zip(*points), linestyle=SYNC_COST_LINE[sync, cost_model],
                                  color=colour, marker=marker,
                                  markerfacecolor=colour if cost_model == "L3" else "none",
                                  label="%s %s %s" % (sync.upper(), cost_model, policy))
        axes.set_xlabel("workers n" if sweep == "n" else "heterogeneity lambda")
        axes.set_ylabel(metric.replace("_", " "))
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    figure.suptitle("SELMCAST vs random-p on one big switch (p = 0.3n, k = 4)")
    return save(figure, csv_path)
