"""experiments.host_allreduce's choice among repeated runs: the rows of the median run,
each with every run's ratio to Gloo, exact only if every run was."""

from experiments.host_allreduce import median_run


def one_run(ratios, exact=True, errors=0):
    """A run's rows as one_run gives them: Gloo's, then ours with their ratios."""
    gloo = {"datapath": "gloo", "ratio_to_gloo": 1.0, "exact": True, "rcvbuf_errors": 0}
    return [gloo] + [{"datapath": "native", "ratio_to_gloo": ratio, "exact": exact,
                      "rcvbuf_errors": errors} for ratio in ratios]


def test_the_rows_are_the_median_runs_with_every_runs_ratio():
    slow, middle, fast = one_run([0.5, 0.6]), one_run([0.9, 0.7]), one_run([1.2, 1.0])
    chosen = median_run([fast, slow, middle])
    assert chosen is middle
    assert [row["runs_ratio_to_gloo"] for row in chosen] == ["", "1.200/0.500/0.900",
                                                             "1.000/0.600/0.700"]


def test_of_an_even_count_the_lower_middle_run_and_a_row_is_exact_only_if_every_run_was():
    first, second = one_run([1.1], errors=3), one_run([0.8], exact=False)
    chosen = median_run([first, second])
    assert chosen is second
    assert chosen[1]["exact"] is False and chosen[1]["rcvbuf_errors"] == 3
    assert median_run([one_run([0.8])])[1]["runs_ratio_to_gloo"] == "0.800"
