"""fabric_check's bad-input contract: a one-line error, a non-zero exit, nothing left behind."""

import pytest

from tests.harness.fabric_check_cli import assert_one_line_error, run


def test_help_describes_the_flags():
    answer = run("--help")
    assert answer.returncode == 0 and "--hosts-per-leaf" in answer.stdout


def test_unknown_parameter():
    assert_one_line_error(run("--switches", "4"), 2, "unrecognized arguments: --switches 4")


@pytest.mark.parametrize("flag, value, message", [
    ("--spines", "0", "spines must be an integer between 1 and 4095, got 0"),
    ("--leaves", "-2", "leaves must be an integer between 1 and 4095, got -2"),
    ("--bw", "0", "bw must be a positive number of Mbit/s"),
])
def test_zero_or_negative_sizes(flag, value, message):
    assert_one_line_error(run(flag, value), 1, message)
