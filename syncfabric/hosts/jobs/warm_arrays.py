"""Arrays a host's rounds use again, with their pages in place before a round needs them.

A new array's pages are faulted in on their first write. On the VMs we run on, the first
write to memory the guest has not used lately cost 100-250 ms per 64 MB, against 7 ms
for a pass over pages in place (docs/datapath.md, "Memory a round writes"). A round
that writes a new array pays that inside the round; Gloo, whose buffers exist before its
first call, does not. So the arrays a job's rounds fill are made, and written once, when
the job is set up, and used again from then on."""

import sys

import numpy as np


def touched_floats(floats):
    """A float32 array of `floats` zeros, every page written now (np.zeros would leave
    them to the first round that writes them)."""
    array = np.empty(floats, dtype=np.float32)
    array.fill(0)
    return array


class RoundArrays:
    """Arrays of `floats` that a worker's rounds write (their results, whose Futures give
    views of them, or the values a caller gives in pieces), each used again once nothing
    holds it. `ready` of them are made now (touched_floats), more as rounds need them; at
    most max(KEPT, ready) are kept for reuse."""
    KEPT = 4

    def __init__(self, floats, ready=0):
        self.floats = floats
        self.arrays = [touched_floats(floats) for _array in range(ready)]

    def take(self):
        for array in self.arrays:
            # held by the list, this loop and getrefcount's argument only: nothing else
            if sys.getrefcount(array) == 3:
                return array
        array = np.empty(self.floats, dtype=np.float32)
        if len(self.arrays) < self.KEPT:
            self.arrays.append(array)
        return array
