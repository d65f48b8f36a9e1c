"""Figures of synchronous rounds and training against Gloo: one round's communication
(allreduce), rounds of real SGD (train) and PyTorch DDP (ddp)."""

import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from experiments.plots.by_mode import draw_mode_medians  # noqa: E402
from experiments.plots.files import read_rows, save  # noqa: E402


def plot_allreduce(csv_path):
    """Median communication time of a synchronous round vs workers, one line per mode and
    one panel per aggregator capacity, with S/B; rows flagged not faithful are left out
    (the footer counts them)."""
    rows = read_rows(csv_path)
    capacities = sorted({float(row["aggregator_bw"]) for row in rows})
    figure, panels = plt.subplots(1, len(capacities), figsize=(5.5 * len(capacities), 4),
                                  sharey=True, squeeze=False)
    for axes, capacity in zip(panels[0], capacities):
        draw_mode_medians(axes, [r for r in rows if float(r["aggregator_bw"]) == capacity],
                          "comm_s")
        axes.axhline(float(rows[0]["line_rate_s"]), color="grey", linestyle="--", label="S / B")
        axes.set_yscale("log")
        axes.set_xlabel("workers N")
        axes.set_title("aggregators %g Mbit/s" % capacity)
        axes.grid(alpha=0.3, which="both")
    panels[0][0].set_ylabel("communication per round (s)")
    panels[0][0].legend(fontsize=8)
    figure.suptitle("one synchronous round of a %.1f MB model" % float(rows[0]["model_mb"]))
    return save(figure, csv_path)


def plot_train(csv_path):
    """Test accuracy against wall-clock training time per mode, and the mean time split
    of a round into parameter distribution, compute and gradient aggregation."""
    rows = read_rows(csv_path)
    modes = list(dict.fromkeys(row["mode"] for row in rows))
    figure, (curve, split) = plt.subplots(1, 2, figsize=(11, 4),
                                          gridspec_kw={"width_ratios": [3, 2]})
    for mode in modes:
        group = [r for r in rows if r["mode"] == mode]
        curve.plot([float(r["elapsed_s"]) for r in group],
                   [float(r["test_accuracy"]) for r in group], marker=".", label=mode)
    curve.set_xlabel("wall-clock training time (s)")
    curve.set_ylabel("test accuracy (digits)")
    curve.set_title("Time to accuracy")
    curve.grid(alpha=0.3)
    curve.legend()
    bottom = [0.0] * len(modes)
    for phase, color in (("param_s", "tab:blue"), ("compute_s", "tab:grey"),
                         ("aggregate_s", "tab:green"), ("update_s", "tab:orange")):
        heights = [statistics.mean(float(r[phase]) for r in rows if r["mode"] == m) for m in modes]
        split.bar(modes, heights, bottom=bottom, color=color, label=phase[:-2])
        bottom = [b + h for b, h in zip(bottom, heights)]
    split.set_ylabel("mean time per round (s)")
    split.set_title("Where a round goes")
    split.tick_params(axis="x", labelsize=8, labelrotation=30)
    split.legend(fontsize=8)
    return save(figure, csv_path)


def plot_ddp(csv_path):
    """Test accuracy against wall-clock training time, one line per mode, a panel per
    model and worker count (experiments.ddp)."""
    rows = read_rows(csv_path)
    panels = list(dict.fromkeys((row["model"], row["workers"]) for row in rows))
    figure, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for axis, (model, workers) in zip(axes[0], panels):
        group = [r for r in rows if (r["model"], r["workers"]) == (model, workers)]
        for mode in dict.fromkeys(r["mode"] for r in group):
            line = [r for r in group if r["mode"] == mode]
            axis.plot([float(r["elapsed_s"]) for r in line],
                      [float(r["test_accuracy"]) for r in line], marker=".", label=mode)
        axis.set_xlabel("wall-clock training time (s)")
        axis.set_ylabel("test accuracy (digits)")
        axis.set_title("DDP, %s, %s workers" % (model, workers))
        axis.grid(alpha=0.3)
        axis.legend()
    return save(figure, csv_path)
