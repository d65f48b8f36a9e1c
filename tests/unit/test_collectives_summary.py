"""experiments.collectives's arithmetic on rows: each collective's median times by
backend and size, and the crossover (the smallest size from which the fabric is never
slower than Gloo), faithful rows only."""

from experiments.collectives import crossover_mb, summary


def row(backend, size_mb, seconds, collective="all_reduce", faithful=True, first_call_s=None):
    return {"backend": backend, "workers": 8, "collective": collective, "size_mb": size_mb,
            "repeat": 1, "seconds": seconds, "through_fabric": backend == "fabric",
            "verified": True, "fidelity_ok": faithful, "fidelity_reason": "",
            "machine_busy": 0.1, "first_call_s": first_call_s}


def test_the_crossover_is_the_smallest_size_from_which_the_fabric_is_never_slower():
    rows = [row("gloo", 0.125, 0.01), row("fabric", 0.125, 0.0104),
            row("gloo", 1, 0.1), row("fabric", 1, 0.12),
            row("gloo", 4, 0.4), row("fabric", 4, 0.3),
            row("gloo", 25, 2.5), row("fabric", 25, 1.5)]
    assert crossover_mb(rows, 8, "all_reduce") == 4
    rows += [row("fabric", 25, 9.0), row("fabric", 25, 9.5)]   # the median is slower at 25
    assert crossover_mb(rows, 8, "all_reduce") is None


def test_a_size_without_a_faithful_time_has_no_claim():
    rows = [row("gloo", 4, 0.4), row("fabric", 4, 0.3, faithful=False)]
    assert crossover_mb(rows, 8, "all_reduce") is None
    text = summary(rows)
    assert "unfaithful" in text and "all_reduce x8: no crossover" in text


def test_the_summary_gives_each_size_against_gloo():
    rows = [row("gloo", 4, 0.4, "broadcast"), row("fabric", 4, 0.2, "broadcast")]
    text = summary(rows)
    assert "0.50x" in text and "broadcast x8: the fabric is no slower from 4 MB" in text


def test_each_groups_first_call_is_said_apart_from_the_collectives():
    rows = [row("gloo", 4, 0.4, first_call_s=0.12), row("fabric", 4, 0.3, first_call_s=3.4)]
    text = summary(rows)
    assert "first calls x8 (the fabric's group makes its jobs in them): gloo 0.120 s, " \
           "fabric 3.400 s" in text
    assert "first calls x8 (the fabric's group makes its jobs in them): none measured" in \
           summary([row("gloo", 4, 0.4)])


def test_a_fabric_group_that_went_to_gloo_says_why_in_the_summary():
    went = dict(row("fabric", 4, 0.4, first_call_s=1.2), through_fabric=False,
                gloo_only="job 1 cannot run on these hosts: rank 3 (h4): no room")
    text = summary([row("gloo", 4, 0.4, first_call_s=0.12), went])
    assert "fabric 1.200 s (went to Gloo: job 1 cannot run on these hosts: rank 3 (h4): " \
           "no room)" in text


def test_a_size_the_fabric_never_ran_is_none_not_unfaithful():
    text = summary([row("gloo", 4, 0.4), row("gloo", 25, 2.5), row("fabric", 4, 0.3)])
    line = next(line for line in text.splitlines()
                if line.startswith("all_reduce") and "25.000" in line)
    assert line.split()[3:] == ["none", "2.500", "-", "-"]


def test_below_the_threshold_the_fabric_is_set_against_its_own_ranks_gloo_group():
    """Each call's pair: the fabric's faster than the Gloo group's beside it in two pairs
    of three, while the machine's pace drifted from pair to pair; its median time is the
    slower one's all the same."""
    rows = paired_rows(0.125, through_fabric=False)
    text = summary(rows)
    line = next(line for line in text.splitlines()
                if line.startswith("all_reduce") and "0.125" in line)
    assert line.split()[3:7] == ["0.300", "0.280", "0.97x", "gloo"]   # the median pair's
    assert "(gloo_s: gloo-beside, call by call beside the fabric's group, ratio the median " \
           "pair's; Gloo's run alone: 0.180 s, 1.67x)" in text
    one_mb = next(line for line in summary(rows).splitlines()
                  if line.startswith("all_reduce") and " 1.000 " in line)
    assert one_mb.split()[4:6] == ["1.000", "0.60x"]   # Gloo's run where none was beside


def paired_rows(size_mb, through_fabric):
    """Gloo's rows and the fabric's at 1 MB (0.60x), and at size_mb three pairs of the
    fabric's call and the Gloo group's beside it: the fabric's faster in two pairs of
    three while the machine's pace drifted from pair to pair, its median time the
    slower one's all the same (the median pair's 0.31/0.32)."""
    fabric, beside = [0.10, 0.30, 0.31], [0.12, 0.28, 0.32]
    rows = [row("gloo", size_mb, 0.18), row("gloo", 1, 1.0), row("fabric", 1, 0.6)]
    for repeat, (ours, theirs) in enumerate(zip(fabric, beside), 1):
        rows += [dict(row("fabric", size_mb, ours), repeat=repeat,
                      through_fabric=through_fabric),
                 dict(row("gloo-beside", size_mb, theirs), repeat=repeat)]
    return rows


def test_the_crossover_counts_the_sizes_the_fabric_carried_by_their_pairs():
    """A size the fabric's group left to Gloo is no crossover, however its pairs came
    out; a crossover size it carried below its threshold is, by the median pair."""
    assert crossover_mb(paired_rows(0.125, through_fabric=False), 8, "all_reduce") == 1
    rows = paired_rows(0.25, through_fabric=True)
    assert crossover_mb(rows, 8, "all_reduce") == 0.25
    third = next(r for r in rows if (r["backend"], r["size_mb"], r["repeat"]) ==
                 ("fabric", 0.25, 3))
    third["seconds"] = 0.35   # slower in that pair too: the median pair's 1.07x
    rows.append(dict(row("fabric", 0.25, 0.01), repeat=4))   # no pair: not counted
    assert crossover_mb(rows, 8, "all_reduce") == 1
