"""The round planner's figure: each case's predicted round beside its lower bound and a
ring all-reduce on the same links, as multiples of S/B (experiments/plan_quality.py)."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from experiments.plots.files import read_rows, save  # noqa: E402


def plot_plan_quality(csv_path):
    rows = read_rows(csv_path)
    labels = ["%s\nN=%s %s\nagg %sx" % (r["topo"], r["workers"], r["placement"],
                                        r["aggregator_x"]) for r in rows]
    positions = range(len(rows))
    figure, axes = plt.subplots(figsize=(max(8, len(rows) * 0.9), 4.5))
    for offset, key, name, color in ((-0.27, "predicted_x", "predicted", "tab:blue"),
                                     (0.0, "bound_x", "lower bound", "tab:grey"),
                                     (0.27, "ring_x", "ring all-reduce", "tab:orange")):
        axes.bar([x + offset for x in positions], [float(r[key]) for r in rows], 0.27,
                 label=name, color=color)
    axes.axhline(1.0, color="black", linestyle="--", linewidth=0.8, label="S / B")
    axes.set_xticks(list(positions), labels, fontsize=7)
    axes.set_ylabel("round time (multiples of S / B)")
    axes.set_title("Streaming round plans against their bound and a ring")
    axes.grid(alpha=0.3, axis="y")
    axes.legend(fontsize=8)
    return save(figure, csv_path)
