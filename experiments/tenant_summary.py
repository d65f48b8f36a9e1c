"""What the tenants experiment's rows say, per mode, over faithful rounds only:
- fairness: Jain's index of the jobs' goodput (model bytes over round time) in the
  rounds that ran while every job ran;
- predictability: each fabric round's time over what its share predicts (the report's
  predicted_round_s in that round's generation), the worst of them;
- spread: the jobs' median round times while all ran, max over min;
- capacity coming back: after each job left, the rate of every job still running in
  its first round that started a second or more later, against its rate before;
- mean job completion time (arrival to last round's end), and its ratio to Gloo's;
- floors: what the switch ports' queues dropped of each class, and a job that kept to
  its floor beside jobs that borrow: its faithful rounds that ran beside another job
  against what its floor (its share) predicts.
"""

import statistics
from collections import defaultdict

from experiments import fidelity

BACK_AFTER_S = 1.0   # a release's capacity is back for rounds that start this much later


def jain(values):
    """Jain's fairness index: 1 when all are equal, 1/n when one has everything."""
    return sum(values) ** 2 / (len(values) * sum(v * v for v in values)) if values else None


def grouped(rows, key):
    """{value of `key`: its rows, in order}."""
    groups = defaultdict(list)
    for row in rows:
        groups[row[key]].append(row)
    return groups


def by_mode(rows):
    return grouped(rows, "mode")


def all_running(rows):
    """The faithful rounds that ran while every job of the mode ran, by job."""
    jobs = {row["job"] for row in rows}
    shared = defaultdict(list)
    for row in rows:
        if row["concurrent_jobs"] == len(jobs) and fidelity.faithful(row):
            shared[row["job"]].append(row)
    return shared


def fairness(rows):
    shared = all_running(rows)
    goodput = [row_list[0]["model_mb"] * 8 / statistics.mean(r["round_s"] for r in row_list)
               for row_list in shared.values()]
    return jain(goodput) if len(goodput) == len(by_job(rows)) else None


def by_job(rows):
    return grouped(rows, "job")


def spread(rows):
    medians = [statistics.median(r["round_s"] for r in job_rows)
               for job_rows in all_running(rows).values()]
    return max(medians) / min(medians) if len(medians) > 1 else None


def worst_prediction(rows):
    ratios = [row["round_s"] / row["predicted_s"] for row in rows
              if row.get("predicted_s") and fidelity.faithful(row)]
    return max(ratios) if ratios else None


def comebacks(rows):
    """[(job that left, job still running, rate before, rate in its first round that
    started BACK_AFTER_S after)] of the fabric jobs."""
    jobs, found = by_job(rows), []
    for left_job, left_rows in jobs.items():
        left_s = left_rows[0]["left_s"]
        for job, job_rows in jobs.items():
            before = [r for r in job_rows if r["started_s"] < left_s and r.get("share_mbps")]
            after = [r for r in job_rows if r["started_s"] >= left_s + BACK_AFTER_S
                     and r.get("share_mbps")]
            if job != left_job and before and after:
                found.append((left_job, job, before[-1]["share_mbps"], after[0]["share_mbps"]))
    return found


def completion_s(rows):
    """Mean over jobs of arrival to last round's end."""
    return statistics.mean(max(r["started_s"] + r["round_s"] for r in job_rows)
                           - job_rows[0]["arrived_s"] for job_rows in by_job(rows).values())


def summary(rows):
    lines = ["%-18s %6s %11s %9s %7s %10s %9s" % ("mode", "jobs", "jain_index", "worst_x",
                                                  "spread", "mean_jct_s", "verified")]
    modes = by_mode(rows)
    for mode, mode_rows in modes.items():
        index, worst, ratio = fairness(mode_rows), worst_prediction(mode_rows), spread(mode_rows)
        lines.append("%-18s %6d %11s %9s %7s %10.1f %9s" % (
            mode, len(by_job(mode_rows)), "%.3f" % index if index else "-",
            "%.2f" % worst if worst else "-", "%.2f" % ratio if ratio else "-",
            completion_s(mode_rows), all(r["verified"] for r in mode_rows)))
    for mode, mode_rows in modes.items():
        for left, job, before, after in comebacks(mode_rows):
            lines.append("%s: after job %d left, job %d ran at %.2f Mbit/s (%.2f before)"
                         % (mode, left, job, after, before))
    if "gloo" in modes:
        gloo = completion_s(modes["gloo"])
        for mode, mode_rows in modes.items():
            if mode != "gloo":
                lines.append("%s: mean job completion %.2fx better than gloo's"
                             % (mode, gloo / completion_s(mode_rows)))
    for mode, mode_rows in modes.items():
        lines += floor_lines(mode, mode_rows)
    lines += [line for line in [fidelity.unfaithful_note(rows)] if line]
    return "\n".join(lines)


def floor_lines(mode, rows):
    """The mode's queue drops, and how each job that kept to its floor fared beside the
    others (its rounds over what its share predicts: median and worst)."""
    first = rows[0]
    lines = []
    if first.get("guaranteed_dropped") is not None:
        lines.append("%s: the switches' queues dropped %d guaranteed and %d borrowed datagrams"
                     % (mode, first["guaranteed_dropped"], first["borrowed_dropped"]))
    for job, job_rows in by_job(rows).items():
        ratios = [r["round_s"] / r["predicted_s"] for r in job_rows
                  if r.get("floor_only") and r.get("predicted_s") and r["concurrent_jobs"] > 1
                  and fidelity.faithful(r)]
        if ratios:
            lines.append("%s: job %d, its floor only beside jobs that borrow: rounds %.2fx "
                         "what its floor predicts (median; worst %.2fx)"
                         % (mode, job, statistics.median(ratios), max(ratios)))
    return lines
