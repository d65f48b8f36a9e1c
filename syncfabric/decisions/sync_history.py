"""Which pairs of workers synced in the last k rounds: SELMCAST forces every pair that
did not, so the controller keeps this history per job (and in its state file)."""

import numpy as np

from syncfabric.decisions.selection_round import SelectionError


class SyncHistory:
    """Which pairs synced in which round: the forced pairs and the longest-unsynced order.

    A pair {i, j} synced in a round when either received the other's update.
    Rounds are counted from 1; a pair is forced in round r when it has not
    synced in rounds r - k .. r - 1, so with a history starting empty nothing
    is forced before round k + 1. Workers are named, so a job may change its
    worker set between rounds."""

    def __init__(self, k, completed_rounds=0, last=()):
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise SelectionError("k must be a positive integer, got %r" % (k,))
        self.k = k
        self.completed_rounds = int(completed_rounds)
        # (name, name) sorted -> round of the pair's last sync
        self._last = {_pair(a, b): int(synced) for a, b, synced in last}

    def matrices(self, names):
        """(forced, unsynced_rounds) as symmetric n x n arrays for `names` in this order."""
        n = len(names)
        index = {name: i for i, name in enumerate(names)}
        last = np.zeros((n, n), dtype=int)
        for (a, b), synced in self._last.items():   # the pairs that ever synced, not n^2
            if a in index and b in index:
                last[index[a], index[b]] = last[index[b], index[a]] = synced
        unsynced = self.completed_rounds + 1 - last
        return (unsynced > self.k) & ~np.eye(n, dtype=bool), unsynced

    def record_round(self, names, receivers):
        """A round ended in which names[i] delivered to names[j] for j in receivers[i]."""
        for i, chosen in enumerate(receivers):
            self.record(names[i], [names[j] for j in chosen])
        self.advance()

    def record(self, sender, receiver_names):
        """Deliveries within the current round (SSP records them as they complete)."""
        for receiver in receiver_names:
            self._last[_pair(sender, receiver)] = self.completed_rounds + 1

    def advance(self):
        self.completed_rounds += 1

    def record_data(self):
        """The history as JSON-able data that from_record_data() takes back (a state file)."""
        return {"k": self.k, "completed_rounds": self.completed_rounds,
                "last": [[a, b, synced] for (a, b), synced in sorted(self._last.items())]}

    @classmethod
    def from_record_data(cls, data):
        """The history record_data() made; SelectionError, KeyError, TypeError or
        ValueError if it is not one."""
        return cls(data["k"], data["completed_rounds"], data["last"])


def _pair(a, b):
    return (a, b) if a <= b else (b, a)
