"""Figures of the controller under stress: repairs through faults, the soak, the
fuzzed REST API and a job's rounds beside a datagram flood."""

import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from experiments.plots.files import read_rows, save  # noqa: E402


TRAFFIC_NAMES = {"tree": "tree", "gradients": "GRID round", "training": "training job",
                 "job": "job's rounds"}


def plot_fault_recovery(csv_path):
    """Per run, the longest silence a worker saw around the fault and the longest run of
    datagrams it lost, beside the same without the fault (a tree), or the time the
    fault added to a round; runs of each --repair side by side."""
    rows = read_rows(csv_path)
    figure, axes = plt.subplots(figsize=(7, 3.5))
    traffic = rows[0].get("traffic", "tree") if rows else "tree"
    trees = traffic == "tree"
    columns = ([("gap_ms", "longest silence at a worker"), ("lost_ms", "longest loss"),
                ("baseline_gap_ms", "silence without the fault"),
                ("baseline_lost_ms", "loss without the fault")] if trees
               else [("extra_s", "time the fault added to the round")])
    labels = ["%s %s" % (r.get("repair", ""), r["run"]) for r in rows]
    width = 0.8 / len(columns)
    for offset, (column, label) in enumerate(columns):
        values = [float(r[column]) if r.get(column) else 0.0 for r in rows]
        axes.bar([i + offset * width for i in range(len(rows))], values, width, label=label,
                 edgecolor=["tab:red" if r["verified"] != "True" else "none" for r in rows])
    axes.set_xticks([i + width * (len(columns) - 1) / 2 for i in range(len(rows))], labels,
                    rotation=45, fontsize="small")
    axes.set_ylim(top=axes.get_ylim()[1] * 1.3)   # room for the legend above the bars
    axes.legend(fontsize="small", ncol=2, loc="upper center")
    axes.set_xlabel("repair and run (red edge: not verified)")
    axes.set_ylabel("ms" if trees else "s")
    axes.set_title("Recovery of a %s from a %s fault" % (TRAFFIC_NAMES.get(traffic, traffic),
                                                          rows[0]["fault"]) if rows else "Recovery")
    axes.grid(alpha=0.3, axis="y")
    return save(figure, csv_path)


def plot_soak(csv_path):
    """Live trees, plans and rounds and the most-booked link over a soak, with the steps
    that broke a rule."""
    rows = read_rows(csv_path)
    elapsed = [float(r["elapsed_s"]) for r in rows]
    figure, trees_axes = plt.subplots(figsize=(7, 3.5))
    for column, color in (("live_trees", "tab:blue"), ("live_plans", "tab:orange"),
                          ("live_rounds", "tab:purple")):
        if rows and column in rows[0]:
            trees_axes.step(elapsed, [int(r[column]) for r in rows], where="post", color=color,
                            label=column.replace("_", " "))
    trees_axes.set_xlabel("time (s)")
    trees_axes.set_ylabel("live")
    trees_axes.legend(loc="upper left", fontsize="small")
    booked_axes = trees_axes.twinx()
    booked_axes.plot(elapsed, [float(r["max_reserved_fraction"]) for r in rows],
                     color="tab:green", alpha=0.7)
    booked_axes.set_ylabel("most-booked link (fraction)", color="tab:green")
    booked_axes.set_ylim(0, 1.05)
    for r, start, end in zip(rows, elapsed, elapsed[1:] + elapsed[-1:]):
        if r["down_link"]:   # down from this step's end to the next one's
            trees_axes.axvspan(start, end, color="tab:grey", alpha=0.15, lw=0)
        if int(r["violations"]):
            trees_axes.axvline(start, color="tab:red")
    trees_axes.set_title("Soak: %d steps, %d violations (red), link down (grey)"
                         % (len(rows), sum(int(r["violations"]) for r in rows)))
    return save(figure, csv_path)


def plot_api_fuzz(csv_path):
    """Examples sent per operation, stacked by the class of status they got, with any
    failure marked."""
    rows = read_rows(csv_path)
    figure, axes = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.5))
    classes = [("2xx", "tab:green"), ("4xx", "tab:blue"), ("503", "tab:orange"),
               ("other 5xx", "tab:red")]
    counts = {name: [] for name, _ in classes}
    for row in rows:
        by_class = dict.fromkeys(counts, 0)
        for item in row["statuses"].split():
            status, count = map(int, item.split(":"))
            name = ("2xx" if status < 300 else "4xx" if status < 500 else
                    "503" if status == 503 else "other 5xx")
            by_class[name] += count
        for name in counts:
            counts[name].append(by_class[name])
    labels = ["%s%s" % (r["operation"], "  FAILED" if any(int(r[c]) for c in (
        "server_errors", "schema_violations", "negative_accepted", "leaks")) else "")
        for r in rows]
    left = [0] * len(rows)
    for name, colour in classes:
        axes.barh(labels, counts[name], left=left, color=colour, label=name)
        left = [a + b for a, b in zip(left, counts[name])]
    axes.invert_yaxis()
    axes.set_xlabel("examples sent")
    axes.set_title("REST API fuzz (schemathesis): %d examples" % sum(left))
    axes.legend(loc="lower right", fontsize=8)
    return save(figure, csv_path)


def plot_admission_flood(csv_path):
    """Each round's time, clean and beside a flood from outside the job, with medians."""
    rows = read_rows(csv_path)
    figure, axes = plt.subplots(figsize=(7, 3.5))
    for mode, colour in (("clean", "tab:blue"), ("flood", "tab:red")):
        times = [float(r["comm_s"]) for r in rows if r["mode"] == mode]
        axes.plot(range(1, len(times) + 1), times, "o-", color=colour, ms=3, label=mode)
        if times:
            axes.axhline(statistics.median(times), color=colour, ls="--", alpha=0.6)
    axes.set_xlabel("round")
    axes.set_ylabel("round time (s)")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize="small")
    flood = next((r for r in rows if r["mode"] == "flood"), rows[0])
    axes.set_title("A job's rounds at %s Mbit/s beside %s datagrams/s from outside it"
                   % (rows[0]["link_mbps"], flood["flood_pps"]))
    return save(figure, csv_path)


def plot_datapath_fuzz(csv_path):
    """Datagrams (or scripted receives) each target fed both data paths, with any
    difference or crash marked."""
    rows = read_rows(csv_path)
    figure, axes = plt.subplots(figsize=(8, 0.45 * len(rows) + 1.5))
    labels = ["%s%s" % (r["target"], "  FAILED" if int(r["differences"]) or int(r["crashes"])
                        else "") for r in rows]
    fed = [int(r["scripted_batches"]) or int(r["datagrams_per_path"]) for r in rows]
    colours = ["tab:purple" if int(r["scripted_batches"]) else "tab:blue" for r in rows]
    axes.barh(labels, fed, color=colours)
    axes.invert_yaxis()
    axes.set_xlabel("datagrams to each path (purple: scripted recvmmsg results)")
    axes.set_title("Data path fuzz: %d examples, %d differences, %d crashes" % (
        sum(int(r["examples"]) for r in rows), sum(int(r["differences"]) for r in rows),
        sum(int(r["crashes"]) for r in rows)))
    return save(figure, csv_path)
