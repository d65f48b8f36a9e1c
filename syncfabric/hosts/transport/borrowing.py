"""What a host sends beyond its floor, in the fabric's borrowed class
(syncfabric/traffic_classes.py), which switches serve only from what guaranteed traffic
leaves.

A sender's floor (its planned rates, metered) goes in the guaranteed class; on top of
it, a borrowed rate in the borrowed class, which adapts to what gets through
(rate_control.LossAdaptiveRate): a borrowed datagram asked for again was lost, and every
INTERVAL_S an interval with a loss halves the rate, one without raises it by a quarter
of the spare: its part of what the host's link leaves above its host's floor. A loss
also doubles the clean intervals the next raise waits for, and a raise that holds
halves them again: where every raise loses (floors that fill the links, jobs back to
back) each loss costs its round a repair's wait. A sender
marks a run of borrowed datagrams (marked()) and returns to guaranteed; repairs always
go guaranteed, so a round never takes longer than its floor allows.
"""

import contextlib
import socket
import time

from syncfabric.hosts.transport.rate_control import FLOOR_FRACTION, LossAdaptiveRate
from syncfabric.traffic_classes import GUARANTEED_DSCP, tos_byte

START_FRACTION = 0.25  # of what the link leaves above the floor: where the rate starts
INTERVAL_S = 0.25      # the loss of the borrowed datagrams judged this often at most
MIN_SENT = 16          # borrowed datagrams an interval must hold to say anything
# of the spare, per clean interval: a worker counts what it lent once a first pass, so
# an interval is about a round; 5% a round took 8 rounds to borrow half of an idle link
PROBE_STEP = 0.25
# clean intervals a raise waits for at most after losses: where nothing is idle, one
# round in this many loses to a probe (at 1, more than half the rounds of 4 jobs back
# to back on 2x4x4 lost some, and took 1.2x their floor's round)
MAX_PROBE_WAIT = 16


class Borrowing:
    """A sender's borrowing on `sock`: datagrams marked with `dscp` within marked(), at
    a rate of up to what its link (ceiling_mbps) leaves above its floor (set_floor: its
    rates move as other jobs come and go)."""

    def __init__(self, sock, dscp, ceiling_mbps):
        self.sock, self.borrowed_tos, self.ceiling = sock, tos_byte(dscp), ceiling_mbps
        self.adaptive = LossAdaptiveRate(0.0, probe_step=PROBE_STEP)   # no spare until a floor
        self.limits = {}   # {destination: Mbit/s} borrowed toward it at most (set_floor)
        self.held = None   # Mbit/s borrowed at most for now, whatever its rate (hold_to)
        self.sent = self.lost = 0               # in the interval being gathered,
        self.interval_start = None              # which began at its first count
        self.probe_wait = 1    # clean intervals the next raise waits for,
        self.clean = 0         # of which this many have passed,
        self.raised = False    # and whether the last interval's verdict was a raise

    @classmethod
    def of(cls, sock, borrow):
        """The Borrowing a job's report allows (JobLayout.borrow: (dscp, ceiling) or
        None); None if it allows none."""
        return None if borrow is None else cls(sock, *borrow)

    def set_floor(self, floor_mbps, host_floor_mbps, limits=None):
        """The sender's floor now, and its host's (every sender of the host's together:
        a worker's legs, its shard's returns): it borrows its floor's part of what the
        link leaves above the host's, from START_FRACTION of that if it had next to
        nothing to borrow before. limits: {destination: Mbit/s} borrowed toward it at
        most (an aggregator's spare, JobLayout.borrow_limits)."""
        self.limits = dict(limits or {})
        if floor_mbps <= 0 or host_floor_mbps <= 0:
            spare = 0.0
        else:
            spare = max(0.0, self.ceiling - host_floor_mbps) * floor_mbps / host_floor_mbps
        adaptive = self.adaptive
        if spare != adaptive.ceiling:
            adaptive.ceiling = spare
            adaptive.rate = min(spare, adaptive.rate)
            if adaptive.rate < FLOOR_FRACTION * spare:
                adaptive.rate = START_FRACTION * spare

    def expect(self, mbps):
        """A round in its window, where the links it shares are expected idle (the other
        jobs keep to their windows): it borrows `mbps` from its start (within the spare,
        held to nothing less), rather than probing up to it; a loss halves it still."""
        self.held = None
        self.adaptive.rate = min(self.adaptive.ceiling, max(0.0, mbps))

    def hold_to(self, mbps):
        """Borrow no more than `mbps` for now (None: no bound beyond the spare), so that a
        job's workers borrow alike (JobLayout.borrow_cap). It bounds rate() only: what
        the sender says it borrows (said) stays what its losses allow, so that workers
        held to each other's least can rise again (docs/sharing.md)."""
        self.held = None if mbps is None else max(0.0, mbps)

    def said(self):
        """The rate it says it borrows, Mbit/s: what its losses allow (not its hold)."""
        return self.adaptive()

    def active(self):
        """Whether it has anything to borrow."""
        return self.rate() > 0

    def rate(self, part=1.0, destination=None):
        """A stream's borrowed rate now, for one that carries `part` of the floor toward
        `destination` (within its hold and its limit, if it has them)."""
        allowed = self.adaptive() if self.held is None else min(self.adaptive(), self.held)
        return min(allowed * part, self.limits.get(destination, float("inf")))

    @contextlib.contextmanager
    def marked(self):
        """The socket's datagrams sent meanwhile go in the borrowed class."""
        self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, self.borrowed_tos)
        try:
            yield
        finally:
            self.sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos_byte(GUARANTEED_DSCP))

    def count(self, sent=0, lost=0, now=None):
        """Borrowed datagrams sent, and borrowed ones found lost (asked for again); once an
        interval holds enough, their share lost moves the rate."""
        now = time.monotonic() if now is None else now
        if self.interval_start is None:
            self.interval_start = now
        self.sent, self.lost = self.sent + sent, self.lost + lost
        if self.sent >= MIN_SENT and now - self.interval_start >= INTERVAL_S:
            self._judge(bool(self.lost), now)
            self.sent = self.lost = 0
            self.interval_start = now

    def _judge(self, lost, now):
        """An interval's verdict: any loss halves the rate (each costs its round a
        repair's wait, REPAIR_QUIET_S) and doubles the wait for the next raise; a clean
        interval after a raise halves that wait, and the rate rises once the wait's
        clean intervals have passed."""
        if lost:
            self.adaptive.update(1.0, now)
            self.probe_wait = min(MAX_PROBE_WAIT, 2 * self.probe_wait)
            self.clean, self.raised = 0, False
            return
        if self.raised:
            self.probe_wait = max(1, self.probe_wait // 2)
        self.clean += 1
        self.raised = self.clean >= self.probe_wait
        if self.raised:
            self.adaptive.update(0.0, now)
            self.clean = 0
