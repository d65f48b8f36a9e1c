"""Figures of jobs: how long a job takes to set up (job_setup), and each job's round
time against wall-clock time as jobs come and go (tenants), one panel per mode, with
each job's arrival (its first round's start) and departure (its last round's end)
marked."""

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
    rows = read_rows(csv_path)
    modes = list(dict.fromkeys(row["mode"] for row in rows))
    figure, panels = plt.subplots(len(modes), 1, figsize=(8, 2.8 * len(modes)), sharex=True,
                                  squeeze=False)
    for axes, mode in zip(panels[:, 0], modes):
        jobs = defaultdict(list)
        for row in rows:
            if row["mode"] == mode:
                jobs[int(row["job"])].append(row)
        for job, job_rows in sorted(jobs.items()):
            started = [float(r["started_s"]) for r in job_rows]
            seconds = [float(r["round_s"]) for r in job_rows]
            line, = axes.plot(started, seconds, marker=".", linewidth=1, label="job %d" % job)
            axes.axvline(min(started), color=line.get_color(), linestyle=":", linewidth=0.8)
            axes.axvline(max(s + t for s, t in zip(started, seconds)), color=line.get_color(),
                         linestyle="--", linewidth=0.8)
        axes.set_title(mode, fontsize=9)
        axes.set_ylabel("round (s)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7, loc="upper right")
    panels[-1, 0].set_xlabel("time since the mode's first job arrived (s); dotted: arrival, "
                             "dashed: departure")
    figure.suptitle("jobs sharing one fabric: each job's rounds as others come and go")
    return save(figure, csv_path)
