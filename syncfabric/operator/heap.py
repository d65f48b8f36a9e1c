"""Garbage collections short enough for a controller that answers in tens of
milliseconds.

CPython's full collection scans every object the process holds: the controller's
fabric, plans and trees, Ryu's and the REST stack's. A job's admission makes tens
of thousands of short-lived objects (its OpenFlow messages), which set one off
now and then in the middle of a request: on 8x8, `experiments.job_setup`'s p99
was 190-250 ms with them and 90-97 ms without. So the objects that survive a
while are frozen (gc.freeze), and a collection scans only those made since. Once
in a while everything is unfrozen and collected, so that cycles among frozen
objects that became garbage are not kept for ever.
"""

import gc

FREEZE_INTERVAL_S = 2.0     # the survivors of what came since are frozen this often
THAW_EVERY = 300            # freezes: every 10 minutes, one full collection of everything


class HeapFreezer:
    def __init__(self):
        self.freezes = 0

    def tick(self):
        """Collect what came since the last tick, then freeze what survived; every
        THAW_EVERY ticks, unfreeze and collect everything first."""
        self.freezes += 1
        if self.freezes % THAW_EVERY == 0:
            gc.unfreeze()
        gc.collect()
        gc.freeze()
