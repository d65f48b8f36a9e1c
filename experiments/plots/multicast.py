"""Figures of the multicast experiments: a PS distributing a model (emulated and
simulated), trees spread over the fabric, and the simulator checked against the emulation."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from experiments.plots.by_mode import MODE_STYLE, plot_medians_by_workers  # noqa: E402
from experiments.plots.files import read_rows, save  # noqa: E402


def plot_ps_distribution(csv_path):
    """Median completion time vs workers per mode, with the line-rate limit S/b_link."""
    return plot_medians_by_workers(csv_path, "completion_s", "completion time per round (s)",
                                   "PS distribution of a %s MB model")


def plot_load_balance(csv_path):
    """Max link utilization and coefficient of variation per mode."""
    rows = read_rows(csv_path)
    modes = [row["mode"] for row in rows]
    figure, (left, right) = plt.subplots(1, 2, figsize=(8, 3.5))
    colours = [MODE_STYLE.get(mode, ("grey", ""))[0] for mode in modes]
    left.bar(modes, [float(r["max_link_util"]) for r in rows], color=colours)
    left.set_ylabel("max link utilization")
    right.bar(modes, [float(r["cov"]) for r in rows], color=colours)
    right.set_ylabel("coefficient of variation of link load")
    figure.suptitle("%s concurrent multicast jobs" % rows[0]["jobs"])
    return save(figure, csv_path)


def plot_sim_ps_multicast(csv_path):
    """Simulated PS distribution: completion vs workers, max link utilization vs jobs."""
    rows = read_rows(csv_path)
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    styles = ["-", "--", ":", "-."]
    fabrics = list(dict.fromkeys(r["fabric"] for r in rows))
    for style, fabric in zip(styles * len(fabrics), fabrics):
        for mode, (colour, marker) in MODE_STYLE.items():
            for axes, sweep, x, y in ((left, "workers", "workers", "completion_s"),
                                      (right, "jobs", "jobs", "max_link_util")):
                points = sorted((int(r[x]), float(r[y])) for r in rows if r["fabric"] == fabric
                                and r["mode"] == mode and r["sweep"] == sweep)
                if points:
                    axes.plot(*zip(*points), linestyle=style, color=colour, marker=marker,
                              label="%s %s" % (fabric, mode))
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("workers")
    left.set_ylabel("completion time (s)")
    left.set_title("One PS, model to N workers")
    right.set_xscale("log", base=2)
    right.set_xlabel("concurrent jobs")
    right.set_ylabel("max link utilization")
    right.set_title("Concurrent jobs")
    for axes in (left, right):
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    return save(figure, csv_path)


def plot_emulation_check(csv_path):
    """Per scenario: each emulated round and the simulated time."""
    rows = read_rows(csv_path)
    scenarios = list(dict.fromkeys(r["scenario"] for r in rows))
    figure, axes = plt.subplots(figsize=(6, 3.5))
    for x, scenario in enumerate(scenarios):
        mine = [r for r in rows if r["scenario"] == scenario]
        axes.scatter([x - 0.1] * len(mine), [float(r["emulated_s"]) for r in mine],
                     color="tab:blue", label="emulated rounds" if x == 0 else None)
        axes.scatter([x + 0.1], [float(mine[0]["simulated_s"])], color="tab:orange", marker="D",
                     label="simulated" if x == 0 else None)
    axes.set_xticks(range(len(scenarios)), scenarios)
    axes.set_yscale("log")
    axes.set_ylabel("completion time (s)")
    axes.set_title("Simulator vs emulation (8x8, 15 workers, 20 Mbit/s)")
    axes.grid(alpha=0.3, axis="y")
    axes.legend()
    return save(figure, csv_path)
