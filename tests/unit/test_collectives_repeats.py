"""experiments.collectives' calls per size: --repeats of each size the fabric carries,
--below-repeats of the size below the threshold (Gloo's under both backends, whose
short calls need more for their median), --repeats of each crossover size (through the
fabric below its threshold too), as the ranks make them and as the progress bar counts
them."""

from contextlib import nullcontext
from types import SimpleNamespace

import pytest

from experiments import collectives
from experiments.traffic import collective_ranks
from syncfabric.torch import FabricOptions

RANK = ["--name", "h1", "--data-ip", "10.0.0.1", "--rank", "0", "--world", "2",
        "--master", "10.0.0.1:29500"]


def calls_made(monkeypatch, argv):
    """(collective, size, repeat, on the Gloo group beside) of every call
    collective_ranks.measure makes after its first, in order."""
    made = []

    def call(_name, _floats, _rank, _world, _seed, group=None):
        return group == "beside"   # what timed() gets as the call made

    def timed(_args, name, size_mb, repeat, made_on_beside, beside=False):
        assert beside == made_on_beside   # the row says which group the call was made on
        made.append((name, size_mb, repeat, made_on_beside))
    monkeypatch.setattr(collective_ranks, "call", call)
    monkeypatch.setattr(collective_ranks, "timed", timed)
    monkeypatch.setattr(collective_ranks, "first_calls", lambda *_a: False)
    monkeypatch.setattr(collective_ranks.dist, "new_group", lambda backend: "beside")
    collective_ranks.measure(collective_ranks.parse_args(RANK + argv))
    return made[1:]   # after the first call


def on_the_world(made):
    """(collective, size, repeat) of the calls made on the world's group."""
    return [(name, size, repeat) for name, size, repeat, beside in made if not beside]


def test_the_size_below_the_threshold_is_called_below_repeats_times(monkeypatch):
    made = on_the_world(calls_made(monkeypatch, ["--sizes", "0.125,1", "--repeats", "3",
                                                 "--below-mb", "0.125", "--below-repeats",
                                                 "9"]))
    for name in collective_ranks.COLLECTIVES:
        assert [r for n, s, r in made if (n, s) == (name, 0.125)] == list(range(1, 10))
        assert [r for n, s, r in made if (n, s) == (name, 1.0)] == [1, 2, 3]


def test_without_below_repeats_every_size_is_called_repeats_times(monkeypatch):
    made = on_the_world(calls_made(monkeypatch, ["--sizes", "0.125,1", "--repeats", "2"]))
    assert len(made) == 2 * 2 * len(collective_ranks.COLLECTIVES)


class Sampling:
    """FabricTestbed.sampler()'s part that backend_rows uses."""

    def start(self):
        return self

    def stop(self):
        return None


class Bed:
    management_url = "http://10.0.0.254:8080"

    def sampler(self):
        return Sampling()


class View:
    hosts = ["h1", "h2", "h3"]


def test_the_experiment_asks_the_ranks_for_its_below_repeats_and_crossover_sizes(
        monkeypatch):
    args = collectives.parse_args(["--workers", "2", "--bw", "10", "--sizes", "1",
                                   "--repeats", "2", "--crossover-sizes", "0.5"])
    assert args.below_repeats == collectives.BELOW_REPEATS
    asked = []
    monkeypatch.setattr(collectives, "run_ranks",
                        lambda _bed, _workers, _module, arguments, on_row:
                        asked.append(arguments) or [])
    collectives.backend_rows(Bed(), None, ["h1", "h2"], "gloo", args, None)
    made = on_the_world(calls_made(monkeypatch, asked[0]))
    below = [r for n, s, r in made if s == collectives.BELOW_MB]
    crossover = [r for n, s, r in made if s == 0.5]
    assert len(below) == collectives.BELOW_REPEATS * len(collective_ranks.COLLECTIVES)
    assert len(crossover) == 2 * len(collective_ranks.COLLECTIVES)
    assert len(made) - len(below) - len(crossover) == 2 * len(collective_ranks.COLLECTIVES)
    assert collectives.parse_args(["--workers", "2", "--bw", "10"]).crossover_sizes == \
        collectives.CROSSOVER_MB


def test_a_crossover_size_is_measured_one_way(capsys):
    for overlapping in ("1", repr(collectives.BELOW_MB)):
        with pytest.raises(SystemExit):
            collectives.parse_args(["--workers", "2", "--bw", "10", "--sizes", "1",
                                    "--crossover-sizes", overlapping])
        assert "apart from --sizes" in capsys.readouterr().err


def test_crossover_sizes_go_through_the_fabric_below_its_threshold_after_gloos_sizes(
        monkeypatch):
    """The sizes left to Gloo come first (a crossover size's call would begin a round
    they then go on in), and the group's threshold is lowered for the crossover sizes
    alone, each call paired with the Gloo group's."""
    options = FabricOptions(min_bytes=256 * 2 ** 10)
    thresholds = []
    monkeypatch.setattr(collective_ranks.dist, "group",
                        SimpleNamespace(WORLD=SimpleNamespace(options=options)))
    monkeypatch.setattr(collective_ranks, "timed",
                        lambda _args, name, size_mb, _repeat, _made, beside=False:
                        thresholds.append((size_mb, beside, options.min_bytes)))
    monkeypatch.setattr(collective_ranks, "call", lambda *_a, **_k: None)
    monkeypatch.setattr(collective_ranks, "first_calls", lambda *_a: None)
    monkeypatch.setattr(collective_ranks.dist, "new_group", lambda backend: "beside")
    collective_ranks.measure(collective_ranks.parse_args(RANK + [
        "--sizes", "0.125,1", "--crossover-sizes", "0.0625,0.5", "--repeats", "2",
        "--below-mb", "0.125", "--below-repeats", "3", "--beside-gloo"]))
    made = thresholds[1:]   # after the first call
    per_size = list(dict.fromkeys((size, bound) for size, _beside, bound in made))
    assert per_size == [(0.125, 256 * 2 ** 10), (0.0625, 0), (0.5, 0), (1.0, 256 * 2 ** 10)]
    for size in (0.0625, 0.5):
        assert [beside for s, beside, _ in made if s == size] == \
            [False, True, True, False] * len(collective_ranks.COLLECTIVES)
    assert [beside for s, beside, _ in made if s == 1.0] == \
        [False, False] * len(collective_ranks.COLLECTIVES)
    assert options.min_bytes == 256 * 2 ** 10


def test_with_beside_gloo_each_call_below_the_threshold_is_made_on_both_groups_in_turn(
        monkeypatch):
    made = calls_made(monkeypatch, ["--sizes", "0.125,1", "--repeats", "2", "--below-mb",
                                    "0.125", "--below-repeats", "3", "--beside-gloo"])
    world = on_the_world(made)
    assert len(world) == (3 + 2) * len(collective_ranks.COLLECTIVES)
    for name in collective_ranks.COLLECTIVES:
        assert [(r, b) for n, s, r, b in made if (n, s) == (name, 0.125)] == [
            (1, False), (1, True), (2, True), (2, False), (3, False), (3, True)]
        assert [(r, b) for n, s, r, b in made if (n, s) == (name, 1.0)] == [
            (1, False), (2, False)]


def test_the_fabrics_ranks_are_asked_for_gloo_beside_and_the_bar_counts_its_rows(
        monkeypatch):
    args = collectives.parse_args(["--workers", "2", "--bw", "10", "--sizes", "1",
                                   "--repeats", "2", "--below-repeats", "5",
                                   "--crossover-sizes", "0.5"])
    asked = []
    monkeypatch.setattr(collectives, "run_ranks",
                        lambda _bed, _workers, _module, arguments, on_row:
                        asked.append(arguments) or [])
    monkeypatch.setattr(collectives, "stream_job", lambda *_a: {"shards": 1})
    monkeypatch.setattr(collectives, "daemons_for", lambda *_a: nullcontext())
    for backend in ("gloo", "fabric"):
        collectives.backend_rows(Bed(), View(), ["h1", "h2"], backend, args, None)
    assert "--beside-gloo" not in asked[0] and "--beside-gloo" in asked[1]
    made = calls_made(monkeypatch, asked[1])
    assert collectives.calls_of(args, "fabric") == len(made) + 1   # and the first call
    assert collectives.calls_of(args, "gloo") == \
        (5 + 2 + 2) * len(collective_ranks.COLLECTIVES) + 1
