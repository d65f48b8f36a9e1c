"""Figures of jobs: how long a job takes to set up (job_setup), and each job's
iterations against wall-clock time as jobs come and go (tenants), one panel per mode,
with each job's arrival (its first round's start) and departure (its last round's end)
marked, beside what its workers sent in each traffic class."""

import statistics
from collections import defaultdict

from experiments.plots.files import plt, read_rows, save


def plot_job_setup(csv_path):
    """Each job's set-up time as the client saw it, in order, with its shard count."""
    rows = read_rows(csv_path)
    setup = [float(r["setup_ms"]) for r in rows]
    figure, axes = plt.subplots(figsize=(7, 3.5))
    axes.plot([int(r["job"]) for r in rows], setup, "o-", color="tab:blue", ms=3)
    axes.axhline(statistics.median(setup), color="tab:green", ls="--",
                 label="median %.0f ms" % statistics.median(setup))
    axes.set_xlabel("job")
    axes.set_ylabel("POST /jobs answered after (ms)")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize="small")
    axes.set_title("Job set-up, %s workers, planning and installs included" % rows[0]["workers"])
    return save(figure, csv_path)


def plot_tenants(csv_path):
    """One row of panels per mode: each job's iterations (round and compute; rounds in a
    CSV without them) against time, and the MB its workers sent in each class."""
    rows = read_rows(csv_path)
    modes = list(dict.fromkeys(row["mode"] for row in rows))
    figure, panels = plt.subplots(len(modes), 2, figsize=(11, 2.8 * len(modes)), sharex="col",
                                  squeeze=False, gridspec_kw={"width_ratios": [3, 1]})
    for (axes, classes), mode in zip(panels, modes):
        jobs = defaultdict(list)
        for row in rows:
            if row["mode"] == mode:
                jobs[int(row["job"])].append(row)
        for job, job_rows in sorted(jobs.items()):
            plot_iterations(axes, job, job_rows)
        plot_class_bytes(classes, jobs)
        axes.set_title(mode, fontsize=9)
        axes.set_ylabel("iteration (s)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7, loc="upper right")
    panels[-1, 0].set_xlabel("time since the mode's first job arrived (s); dotted: arrival, "
                             "dashed: departure")
    panels[-1, 1].set_xlabel("job")
    figure.suptitle("jobs sharing one fabric: each job's iterations as others come and go")
    return save(figure, csv_path)


def plot_iterations(axes, job, job_rows):
    """A job's iterations (its rounds if the CSV has none) against when each started,
    its arrival and departure marked."""
    started = [float(r["started_s"]) for r in job_rows]
    seconds = [float(r.get("iteration_s") or r["round_s"]) for r in job_rows]
    line, = axes.plot(started, seconds, marker=".", linewidth=1, label="job %d" % job)
    axes.axvline(min(started), color=line.get_color(), linestyle=":", linewidth=0.8)
    axes.axvline(max(s + t for s, t in zip(started, seconds)), color=line.get_color(),
                 linestyle="--", linewidth=0.8)


def plot_class_bytes(axes, jobs):
    """Each job's workers' gradient MB in the guaranteed and borrowed classes, stacked
    (nothing for Gloo's jobs, which the fabric does not count)."""
    numbers = sorted(jobs)
    guaranteed, borrowed = ([sum(float(r.get(column) or 0) for r in jobs[job]) / 1e6
                             for job in numbers]
                            for column in ("guaranteed_bytes", "borrowed_bytes"))
    if not any(guaranteed):
        axes.text(0.5, 0.5, "not counted\n(Gloo's jobs)", ha="center", va="center",
                  transform=axes.transAxes, fontsize=8)
        axes.set_yticks([])
        return
    axes.bar(numbers, guaranteed, color="tab:blue", label="guaranteed")
    axes.bar(numbers, borrowed, bottom=guaranteed, color="tab:orange", label="borrowed")
    axes.set_ylabel("MB sent", fontsize=8)
    axes.set_xticks(numbers)
    axes.legend(fontsize=7)
