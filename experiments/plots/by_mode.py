"""What the figures of one line (or bar) per mode share: each mode's colour and marker,
and the median of a column against the number of workers, with the line-rate limit."""

import statistics
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from experiments.plots.files import read_rows, save  # noqa: E402


MODE_STYLE = {"unicast": ("tab:red", "s"), "random": ("tab:orange", "^"),
              "path-aware": ("tab:blue", "o"), "gloo-allreduce": ("black", "D"),
              "gloo-ps": ("tab:brown", "v"), "unicast+ps": ("tab:red", "s"),
              "stream": ("tab:green", "*"), "stream-colocated": ("tab:olive", "P"),
              "stream-in-network": ("tab:cyan", "X"),
              "multicast+ina": ("tab:blue", "o")}


def plot_medians_by_workers(csv_path, value, ylabel, title):
    """Median `value` vs workers, one line per mode, with the line-rate limit S/b_link;
    rows flagged not faithful are left out (the footer counts them)."""
    rows = read_rows(csv_path)
    figure, axes = plt.subplots(figsize=(6, 4))
    draw_mode_medians(axes, rows, value)
    axes.axhline(float(rows[0]["line_rate_s"]), color="grey", linestyle="--", label="S / b_link")
    axes.set_xlabel("workers N")
    axes.set_ylabel(ylabel)
    axes.set_ylim(bottom=0)
    axes.set_title(title % rows[0]["model_mb"])
    axes.grid(alpha=0.3)
    axes.legend()
    return save(figure, csv_path)


def draw_mode_medians(axes, rows, value):
    """One line per mode on `axes`: the median `value` of its faithful rows (a row flagged
    not faithful is left out) against the number of workers."""
    by_mode = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row.get("fidelity_ok") != "False":
            by_mode[row["mode"]][int(row["workers"])].append(float(row[value]))
    for mode, points in by_mode.items():
        workers = sorted(points)
        colour, marker = MODE_STYLE.get(mode, (None, "x"))
        axes.plot(workers, [statistics.median(points[n]) for n in workers], marker=marker,
                  color=colour, label=mode)
