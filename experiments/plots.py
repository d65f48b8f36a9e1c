"""Figures from the experiments' CSV files (each experiment also calls these itself).

    python -m experiments.plots ps_distribution results/ps_distribution.csv
    python -m experiments.plots --help     # the experiments it draws
"""

import statistics
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from experiments import host_plots  # noqa: E402
from experiments.cli import ArgumentParser  # noqa: E402
from experiments.plot_files import read_rows, save  # noqa: E402

MODE_STYLE = {"unicast": ("tab:red", "s"), "random": ("tab:orange", "^"),
              "path-aware": ("tab:blue", "o"), "gloo-allreduce": ("black", "D"),
              "gloo-ps": ("tab:brown", "v"), "unicast+ps": ("tab:red", "s"),
              "stream": ("tab:green", "*"), "stream-colocated": ("tab:olive", "P"),
              "stream-in-network": ("tab:cyan", "X"),
              "multicast+ina": ("tab:blue", "o")}
SELECTION_STYLE = {"selmcast": ("tab:blue", "o"), "random": ("tab:orange", "^"),
                   "milp": ("tab:green", "s")}
SYNC_COST_LINE = {("bsp", "L3"): "-", ("bsp", "L7"): "--", ("ssp", "L3"): ":",
                  ("ssp", "L7"): "-."}


def plot_ps_distribution(csv_path):
    """Median completion time vs workers per mode, with the line-rate limit S/b_link."""
    return plot_medians_by_workers(csv_path, "completion_s", "completion time per round (s)",
                                   "PS distribution of a %s MB model")


def plot_allreduce(csv_path):
    """Median communication time of a synchronous round vs workers, one line per mode and
    one panel per aggregator capacity, with S/B; rows flagged not faithful are left out
    (the footer counts them)."""
    rows = read_rows(csv_path)
    capacities = sorted({float(row["aggregator_bw"]) for row in rows})
    figure, panels = plt.subplots(1, len(capacities), figsize=(5.5 * len(capacities), 4),
                                  sharey=True, squeeze=False)
    for axes, capacity in zip(panels[0], capacities):
        by_mode = defaultdict(lambda: defaultdict(list))
        for row in rows:
            if float(row["aggregator_bw"]) == capacity and row.get("fidelity_ok") != "False":
                by_mode[row["mode"]][int(row["workers"])].append(float(row["comm_s"]))
        for mode, points in by_mode.items():
            workers = sorted(points)
            colour, marker = MODE_STYLE.get(mode, (None, "x"))
            axes.plot(workers, [statistics.median(points[n]) for n in workers], marker=marker,
                      color=colour, label=mode)
        axes.axhline(float(rows[0]["line_rate_s"]), color="grey", linestyle="--", label="S / B")
        axes.set_yscale("log")
        axes.set_xlabel("workers N")
        axes.set_title("aggregators %g Mbit/s" % capacity)
        axes.grid(alpha=0.3, which="both")
    panels[0][0].set_ylabel("communication per round (s)")
    panels[0][0].legend(fontsize=8)
    figure.suptitle("one synchronous round of a %.1f MB model" % float(rows[0]["model_mb"]))
    return save(figure, csv_path)


def plot_medians_by_workers(csv_path, value, ylabel, title):
    """Median `value` vs workers, one line per mode, with the line-rate limit S/b_link;
    rows flagged not faithful are left out (the footer counts them)."""
    rows = read_rows(csv_path)
    by_mode = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row.get("fidelity_ok") == "False":
            continue
        by_mode[row["mode"]][int(row["workers"])].append(float(row[value]))
    figure, axes = plt.subplots(figsize=(6, 4))
    for mode, points in by_mode.items():
        workers = sorted(points)
        colour, marker = MODE_STYLE.get(mode, (None, "x"))
        axes.plot(workers, [statistics.median(points[n]) for n in workers], marker=marker,
                  color=colour, label=mode)
    axes.axhline(float(rows[0]["line_rate_s"]), color="grey", linestyle="--", label="S / b_link")
    axes.set_xlabel("workers N")
    axes.set_ylabel(ylabel)
    axes.set_ylim(bottom=0)
    axes.set_title(title % rows[0]["model_mb"])
    axes.grid(alpha=0.3)
    axes.legend()
    return save(figure, csv_path)


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


def plot_fault_recovery(csv_path):
    """Per run, the longest silence a worker saw around the fault and the longest run of
    datagrams it lost (a tree), or the time the fault added to a gradient round; runs
    of each --repair side by side."""
    rows = read_rows(csv_path)
    figure, axes = plt.subplots(figsize=(7, 3.5))
    trees = not rows or rows[0].get("traffic", "tree") == "tree"
    columns = ([("gap_ms", "longest silence at a worker"), ("lost_ms", "longest loss")] if trees
               else [("extra_s", "time the fault added to the round")])
    labels = ["%s %s" % (r.get("repair", ""), r["run"]) for r in rows]
    width = 0.8 / len(columns)
    for offset, (column, label) in enumerate(columns):
        values = [float(r[column]) if r.get(column) else 0.0 for r in rows]
        axes.bar([i + offset * width for i in range(len(rows))], values, width, label=label,
                 edgecolor=["tab:red" if r["verified"] != "True" else "none" for r in rows])
    axes.set_xticks([i + width * (len(columns) - 1) / 2 for i in range(len(rows))], labels,
                    rotation=45, fontsize="small")
    axes.legend(fontsize="small")
    axes.set_xlabel("repair and run (red edge: not verified)")
    axes.set_ylabel("ms" if trees else "s")
    axes.set_title("Recovery of a %s from a %s fault" % ("tree" if trees else "GRID round",
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


INA_STYLE = {"grid": ("tab:blue", "o"), "nearest": ("tab:orange", "^"),
             "switchml": ("tab:green", "s"), "no-ina": ("tab:red", "x"),
             "inart": ("tab:blue", "o"), "atp": ("tab:orange", "^"),
             "equal-split": ("tab:purple", "D"), "lbmm": ("tab:red", "x")}


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


# which figure each experiment's CSV gets, by the experiment's name
PLOTTERS = {"ps_distribution": plot_ps_distribution, "load_balance": plot_load_balance,
            "selmcast_selection": plot_selmcast_selection, "selmcast": plot_selmcast,
            "ina": plot_ina, "grid_example": plot_ina, "inart_example": plot_ina,
            "train": plot_train, "allreduce": plot_allreduce,
            "fault_recovery": plot_fault_recovery, "soak": plot_soak,
            "ina_optimality": plot_ina_optimality, "api_fuzz": plot_api_fuzz,
            "sim.ps_multicast": plot_sim_ps_multicast, "sim.selmcast": plot_sim_selmcast,
            "sim.ina": plot_sim_ina, "sim.emulation_check": plot_emulation_check,
            "job_setup": plot_job_setup, "host_bench": host_plots.plot_host_bench,
            "host_allreduce": host_plots.plot_host_allreduce, "ddp": plot_ddp,
            "admission_flood": plot_admission_flood}


def main(argv=None):
    parser = ArgumentParser(prog="python -m experiments.plots",
                            description="Draw an experiment's figure from its CSV (a PNG beside it).")
    parser.add_argument("experiment", choices=sorted(PLOTTERS), metavar="EXPERIMENT",
                        help="the experiment that wrote the CSV: %s" % ", ".join(sorted(PLOTTERS)))
    parser.add_argument("csv", nargs="+", help="its CSV file(s)")
    args = parser.parse_args(argv)
    for path in args.csv:
        print(PLOTTERS[args.experiment](path))


if __name__ == "__main__":
    main()
