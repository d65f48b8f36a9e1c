"""The controller's heap freezer: survivors frozen at every tick, everything thawed and
collected once every THAW_EVERY ticks."""

from syncfabric.operator import heap


class RecordingGc:
    def __init__(self):
        self.calls = []

    def collect(self):
        self.calls.append("collect")

    def freeze(self):
        self.calls.append("freeze")

    def unfreeze(self):
        self.calls.append("unfreeze")


def test_every_tick_collects_then_freezes_and_one_in_thaw_every_thaws_first(monkeypatch):
    recorded = RecordingGc()
    monkeypatch.setattr(heap, "gc", recorded)
    monkeypatch.setattr(heap, "THAW_EVERY", 3)
    freezer = heap.HeapFreezer()
    for _tick in range(6):
        freezer.tick()
    tick = ["collect", "freeze"]
    assert recorded.calls == tick + tick + ["unfreeze"] + tick + tick + tick + ["unfreeze"] + tick


def test_a_tick_freezes_what_survived_in_this_process():
    import gc
    kept = [object() for _ in range(100)]
    try:
        heap.HeapFreezer().tick()
        assert gc.get_freeze_count() >= len(kept)
    finally:
        gc.unfreeze()
