"""A multicast sender's rate, adapted to what its receivers report losing.

NORM (RFC 5740) paces a sender to its slowest receiver. We keep its principle and a
simpler law (AIMD on loss instead of NORM-CC's TCP equation): on loss above
LOSS_TARGET, drop to what got through, with headroom (at most by half), at most once
per hold time (feedback about packets sent before the drop is still arriving); on
clean feedback,
probe back up by a step, never above the reservation. A platform that cannot carry
the reserved rate then sees a transfer finish in a few passes at the rate it
sustains, instead of repair passes that lose as much as the first.
"""

import bisect

LOSS_TARGET = 0.01
BACKOFF = 0.9           # headroom under what got through
PROBE_STEP = 0.05       # of the ceiling, per clean report
HOLD_S = 0.3
INTERVAL_S = 0.1        # reports within one interval count once, by the worst
FLOOR_FRACTION = 0.02   # never below this share of the ceiling


class LossAdaptiveRate:
    def __init__(self, ceiling_mbps, start_mbps=None, probe_step=PROBE_STEP):
        self.ceiling, self.probe_step = ceiling_mbps, probe_step
        self.rate = min(start_mbps or ceiling_mbps, ceiling_mbps)
        self.held_until = float("-inf")
        self.lowest = self.rate
        self.interval = None    # (started, worst loss) of the reports being gathered

    def update(self, loss, now):
        """The rate after a report of `loss` (the worst receiver's share lost since its
        last report) at time `now` (seconds)."""
        if loss > LOSS_TARGET:
            if now >= self.held_until:
                # at most halved: a stall loses a burst, which says little about the rate
                self.rate = max(FLOOR_FRACTION * self.ceiling, self.rate / 2,
                                self.rate * (1 - loss) * BACKOFF)
                self.held_until = now + HOLD_S
                self.lowest = min(self.lowest, self.rate)
        elif now >= self.held_until:
            self.rate = min(self.ceiling, self.rate + self.probe_step * self.ceiling)
        return self.rate

    def report(self, loss, now):
        """One receiver's report within a pass; every INTERVAL_S the worst of them
        updates the rate (many receivers must not each probe up)."""
        started, worst = self.interval or (now, 0.0)
        worst = max(worst, loss)
        if now - started >= INTERVAL_S:
            self.interval = None
            return self.update(worst, now)
        self.interval = (started, worst)
        return self.rate

    def __call__(self):
        return self.rate


class ReceiverLoss:
    """Loss per receiver from its progress reports within one pass: datagrams it got
    against the position, in the pass's sending order (ascending chunk indices), of the
    highest chunk it saw."""

    MIN_EXPECTED = 64   # datagrams a report must cover to say anything about loss

    def __init__(self, sent_indices):
        self.sent = list(sent_indices)
        if any(a >= b for a, b in zip(self.sent, self.sent[1:])):
            raise ValueError("a pass sends its chunks in ascending order")
        self.last = {}                           # receiver -> (datagrams, position)

    def position(self, highest):
        """How many datagrams of the pass were sent up to chunk `highest`."""
        return bisect.bisect_right(self.sent, highest)

    def report(self, receiver, datagrams, highest):
        """The receiver's loss since its last counted report, or None if too little was sent."""
        position = self.position(highest)
        got_before, position_before = self.last.get(receiver, (0, 0))
        expected = position - position_before
        if expected < self.MIN_EXPECTED:
            return None
        self.last[receiver] = (datagrams, position)
        return max(0.0, 1.0 - (datagrams - got_before) / expected)
