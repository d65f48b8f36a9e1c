"""The figure of experiments.collectives: each collective's time against its size, the
fabric's backend beside Gloo's, a panel per collective and a line per backend and
worker count (the median of the faithful repeats; log-log)."""

import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from experiments.fidelity import faithful  # noqa: E402
from experiments.plots.files import read_rows, save  # noqa: E402


def plot_collectives(csv_path):
    rows = [row for row in read_rows(csv_path) if faithful(row)]
    collectives = list(dict.fromkeys(row["collective"] for row in rows))
    figure, axes = plt.subplots(1, max(1, len(collectives)), figsize=(4.5 * len(collectives), 4),
                                squeeze=False)
    for axis, collective in zip(axes[0], collectives):
        mine = [r for r in rows if r["collective"] == collective]
        for backend, workers in dict.fromkeys((r["backend"], r["workers"]) for r in mine):
            line = [r for r in mine if (r["backend"], r["workers"]) == (backend, workers)]
            sizes = sorted({float(r["size_mb"]) for r in line})
            axis.plot(sizes, [statistics.median(float(r["seconds"]) for r in line
                                                if float(r["size_mb"]) == size)
                              for size in sizes],
                      marker="o", linestyle="-" if backend == "fabric" else "--",
                      label="%s x%s" % (backend, workers))
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("size (MB)")
        axis.set_ylabel("time (s), slowest rank")
        axis.set_title(collective)
        axis.grid(alpha=0.3, which="both")
        axis.legend()
    return save(figure, csv_path)
