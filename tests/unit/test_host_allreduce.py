"""experiments.host_allreduce's choice among repeated runs (the rows of the median run,
each with every run's ratio to Gloo, exact only if every run was) and its rows per MTU
(GSO rows only where GSO sends runs)."""

import pytest

from experiments.host_allreduce import gso_runs, median_run, parse_args, variants
from experiments.host_jobs import plan_job


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


def test_every_mtu_has_its_rows_and_gso_rows_only_where_two_datagrams_fit_one_send():
    args = parse_args(["--placements", "dedicated", "--datapaths", "python,native"])
    assert args.mtus == [9000, 65535]
    assert variants(args, 9000) == [("dedicated", "python", "off", 1),
                                    ("dedicated", "native", "off", 1),
                                    ("dedicated", "native", "on", 1)]
    assert variants(args, 65535) == [("dedicated", "python", "off", 1),
                                     ("dedicated", "native", "off", 1)]
    assert gso_runs(32781) and not gso_runs(32782)   # 2 x 32753 bytes is UDP's 65507 at most


@pytest.mark.parametrize("mtus", ["575", "9000,65536", "0"])
def test_an_mtu_no_ipv4_datagram_fills_is_refused(mtus, capsys):
    with pytest.raises(SystemExit):
        parse_args(["--mtus", mtus])
    assert "--mtus: from 576 to 65535 bytes" in capsys.readouterr().err


def test_the_jobs_fragments_fill_the_networks_mtu():
    addresses = {"w1": "10.66.0.1", "w2": "10.66.0.2", "ps1": "10.66.0.3"}
    for mtu, fragment_bytes in ((9000, 8948), (65535, 65480)):
        job = plan_job(addresses, ["w1", "w2"], 10 * fragment_bytes, "dedicated", 1, mtu)
        assert job["fragment_bytes"] == fragment_bytes   # the MTU less IP, UDP and our header
        assert job["fragments"] == 10
