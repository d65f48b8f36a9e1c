"""Figures of in-network aggregation: GRID and the baselines' rates (emulated and
simulated), and the placements' distance from the optimum."""

import statistics
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from experiments.plots.files import read_rows, save  # noqa: E402


INA_STYLE = {"grid": ("tab:blue", "o"), "nearest": ("tab:orange", "^"),
             "switchml": ("tab:green", "s"), "no-ina": ("tab:red", "x"),
             "inart": ("tab:blue", "o"), "atp": ("tab:orange", "^"),
             "equal-split": ("tab:purple", "D"), "lbmm": ("tab:red", "x")}


def plot_ina(csv_path):
    """Minimum worker rate per policy (and number of workers): planned, and measured
    when the CSV has it (grid_example, inart_example, ina)."""
    rows = read_rows(csv_path)
    groups = defaultdict(list)
    for row in rows:
        several = row.get("ps_count") not in (None, "", "1")
        groups["%s\n%s workers%s" % (row["policy"], row["workers"],
                                     "\n%s PSs" % row["ps_count"] if several else "")].append(row)
    labels = list(groups)

    def median(key, group):
        values = [float(r[key]) for r in group if r.get(key) not in (None, "")]
        return statistics.median(values) if values else 0.0
    planned_key = next(k for k in ("theta_mbps", "min_rate", "rate") if k in rows[0])
    measured_key = next(k for k in ("min_rate_mbps", "measured_min_rate_mbps", "measured_rate_mbps")
                        if k in rows[0])
    planned = [median(planned_key, groups[k]) for k in labels]
    measured = [median(measured_key, groups[k]) for k in labels]
    positions = range(len(labels))
    figure, axes = plt.subplots(figsize=(max(6, len(labels) * 1.1), 4))
    axes.bar([x - 0.2 for x in positions], planned, 0.4, label="planned theta", color="tab:grey")
    if any(measured):
        axes.bar([x + 0.2 for x in positions], measured, 0.4, label="measured", color="tab:blue")
    axes.set_xticks(list(positions), labels, fontsize=8)
    axes.set_ylabel("minimum worker rate (Mbit/s)")
    axes.set_title("Gradient aggregation: minimum worker rate per policy")
    axes.grid(alpha=0.3, axis="y")
    axes.legend()
    return save(figure, csv_path)


def plot_sim_ina(csv_path):
    """Sending rate per worker vs workers, one panel per fabric setting and PS count."""
    rows = read_rows(csv_path)
    panels = list(dict.fromkeys((r["part"], r["fabric"], r["programmable"], r["ps_count"],
                                 r.get("links", "counted")) for r in rows))
    columns = min(3, len(panels))
    lines = -(-len(panels) // columns)
    figure, grid = plt.subplots(lines, columns, figsize=(5 * columns, 3.6 * lines), squeeze=False)
    for axes, (part, fabric, programmable, pss, links) in zip(grid.flat, panels):
        mine = [r for r in rows if (r["part"], r["fabric"], r["programmable"], r["ps_count"],
                                    r.get("links", "counted")) == (part, fabric, programmable, pss,
                                                                   links)]
        unit = 1000.0 if part == "grid" else 1.0
        for policy in dict.fromkeys(r["policy"] for r in mine):
            colour, marker = INA_STYLE.get(policy, (None, "."))
            points = sorted((int(r["workers"]), float(r["rate_mbps"]) / unit) for r in mine
                            if r["policy"] == policy)
            axes.plot(*zip(*points), color=colour, marker=marker, label=policy)
        axes.set_title("%s: %s, %s programmable, %s PS%s" % (
            part, fabric, programmable, pss, "" if links == "counted" else ", paper's links"),
            fontsize=9)
        axes.set_xlabel("workers")
        axes.set_ylabel("rate per worker (%s)" % ("Gbit/s" if part == "grid" else "Mbit/s"))
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    for axes in list(grid.flat)[len(panels):]:
        axes.set_visible(False)
    return save(figure, csv_path)


def plot_ina_optimality(csv_path):
    """The distribution of plan / integral optimum per planner, and the reported gaps."""
    rows = read_rows(csv_path)
    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.8))
    for planner, colour in (("grid", "tab:blue"), ("inart", "tab:green")):
        ratios = sorted(float(r["ratio"]) for r in rows if r["planner"] == planner)
        gaps = sorted(float(r["optimality_gap"]) for r in rows if r["planner"] == planner)
        if ratios:
            share = [(i + 1) / len(ratios) for i in range(len(ratios))]
            left.step(ratios, share, where="post", color=colour, label=planner)
            right.step(gaps, share, where="post", color=colour, label=planner)
    left.axvline(0.99, color="grey", linestyle=":", label="0.99")
    left.set_xlabel("plan rate / integral optimum (brute force)")
    right.set_xlabel("optimality gap the plan reports")
    for axis in (left, right):
        axis.set_ylabel("share of instances")
        axis.grid(alpha=0.3)
        axis.legend(fontsize="small")
    figure.suptitle("%d random small instances per planner" % (len(rows) // 2))
    return save(figure, csv_path)
