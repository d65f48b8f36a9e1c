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
    rows = [row("gloo", 0.125, 0.18), row("fabric", 0.125, 0.20),
            row("gloo-beside", 0.125, 0.19), row("gloo-beside", 0.125, 0.21),
            row("gloo-beside", 0.125, 0.195),
            row("gloo", 1, 1.0), row("fabric", 1, 0.6)]
    text = summary(rows)
    line = next(line for line in text.splitlines()
                if line.startswith("all_reduce") and "0.125" in line)
    assert line.split()[3:6] == ["0.200", "0.195", "1.03x"]   # the median beside it
    assert "(gloo_s: gloo-beside, call by call beside the fabric's group; Gloo's run " \
           "alone: 0.180 s, 1.11x)" in text
    assert crossover_mb(rows, 8, "all_reduce") == 1   # 0.200 s is slower than 0.195 s
    rows.append(row("gloo-beside", 0.125, 0.25))
    rows.append(row("gloo-beside", 0.125, 0.25))
    assert crossover_mb(rows, 8, "all_reduce") == 0.125
    one_mb = next(line for line in summary(rows).splitlines()
                  if line.startswith("all_reduce") and " 1.000 " in line)
    assert one_mb.split()[4:6] == ["1.000", "0.60x"]   # Gloo's run where none was beside
