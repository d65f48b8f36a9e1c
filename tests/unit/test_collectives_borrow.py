"""experiments.collectives --borrow: the fabric built with its traffic classes and put
under the fair policy with borrowing before either backend's calls run; without it,
neither (the fabric's default policy, no classes)."""

import pytest

from experiments import collectives


class RecordingBed:
    """FabricTestbed's part that run() uses, saying what was asked of it and when."""

    def __init__(self, said, data_plane):
        self.said, self.client = said, self
        said.append(("bed", data_plane.traffic_classes))

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        return False

    def put(self, path, body):
        self.said.append(("put", path, body))

    def leftovers(self):
        return {}


@pytest.mark.parametrize("borrow", [False, True])
def test_borrow_builds_the_classes_and_lends_before_any_call(monkeypatch, borrow):
    said = []
    monkeypatch.setattr(collectives, "job_fabric", lambda args, bw: (None, None, ["h1", "h2"]))
    monkeypatch.setattr(collectives, "FabricTestbed",
                        lambda topo, data_plane, **_kw: RecordingBed(said, data_plane))
    monkeypatch.setattr(collectives, "backend_rows",
                        lambda bed, view, workers, backend, args, bar:
                        said.append(("calls", backend)) or [])
    args = collectives.parse_args(["--workers", "2", "--bw", "10"]
                                  + ["--borrow"] * borrow)
    assert args.borrow is borrow
    collectives.run(args)
    lent = [("put", "/fabric/policy", {"policy": "fair", "borrow": True})] if borrow else []
    assert said == [("bed", borrow), *lent, ("calls", "gloo"), ("calls", "fabric")]
