"""experiments.collectives' calls per size: --repeats of each size the fabric carries,
--below-repeats of the size below the threshold (Gloo's under both backends, whose
short calls need more for their median), as the ranks make them and as the progress
bar counts them."""

from experiments import collectives
from experiments.traffic import collective_ranks

RANK = ["--name", "h1", "--data-ip", "10.0.0.1", "--rank", "0", "--world", "2",
        "--master", "10.0.0.1:29500"]


def calls_made(monkeypatch, argv):
    """(collective, size, repeat) of every call collective_ranks.measure makes."""
    made = []
    monkeypatch.setattr(collective_ranks, "timed",
                        lambda _args, name, size_mb, repeat, _made:
                        made.append((name, size_mb, repeat)))
    monkeypatch.setattr(collective_ranks, "call", lambda *_a: None)
    monkeypatch.setattr(collective_ranks, "first_calls", lambda *_a: None)
    collective_ranks.measure(collective_ranks.parse_args(RANK + argv))
    return made[1:]   # after the first call


def test_the_size_below_the_threshold_is_called_below_repeats_times(monkeypatch):
    made = calls_made(monkeypatch, ["--sizes", "0.125,1", "--repeats", "3",
                                    "--below-mb", "0.125", "--below-repeats", "9"])
    for name in collective_ranks.COLLECTIVES:
        assert [r for n, s, r in made if (n, s) == (name, 0.125)] == list(range(1, 10))
        assert [r for n, s, r in made if (n, s) == (name, 1.0)] == [1, 2, 3]


def test_without_below_repeats_every_size_is_called_repeats_times(monkeypatch):
    made = calls_made(monkeypatch, ["--sizes", "0.125,1", "--repeats", "2"])
    assert len(made) == 2 * 2 * len(collective_ranks.COLLECTIVES)


class Sampling:
    """FabricTestbed.sampler()'s part that backend_rows uses."""

    def start(self):
        return self

    def stop(self):
        return None


class Bed:
    def sampler(self):
        return Sampling()


def test_the_experiment_asks_the_ranks_for_its_below_repeats(monkeypatch):
    args = collectives.parse_args(["--workers", "2", "--bw", "10", "--sizes", "1",
                                   "--repeats", "2"])
    assert args.below_repeats == collectives.BELOW_REPEATS
    asked = []
    monkeypatch.setattr(collectives, "run_ranks",
                        lambda _bed, _workers, _module, arguments, on_row:
                        asked.append(arguments) or [])
    collectives.backend_rows(Bed(), None, ["h1", "h2"], "gloo", args, None)
    made = calls_made(monkeypatch, asked[0])
    below = [r for n, s, r in made if s == collectives.BELOW_MB]
    assert len(below) == collectives.BELOW_REPEATS * len(collective_ranks.COLLECTIVES)
    assert len(made) - len(below) == 2 * len(collective_ranks.COLLECTIVES)
