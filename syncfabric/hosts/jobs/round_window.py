"""Which rounds a summing node takes datagrams for (job_roles.SummingNode.sums): a round
it keeps, or one within a window of the newest round it has begun: no older than the
oldest it could still keep, and at most `ahead` rounds past the newest. The first round
it begins may be any; a round number past the wire's 32 bits never is.

A datagram that names a round outside the window is dropped and counted: it never opens
a round, so it cannot push the rounds in flight out of the node's memory. Without the
window, sixteen control messages naming rounds 2**32 + k from a member's address made a
node forget every real round (docs/security.md)."""

from syncfabric.hosts.packets.control_messages import whole
from syncfabric.hosts.packets.gradient_wire import ROUND_MAX


class RoundWindow:
    """The window of rounds a node opens: newest, the newest round it has begun (None
    before the first); `kept`, how many rounds it keeps; `ahead`, how far past the newest
    a round may begin."""

    def __init__(self, kept, ahead):
        self.kept, self.ahead = kept, ahead
        self.newest = None

    def admits(self, number):
        """Whether a datagram naming round `number` (as it came: any JSON value) may
        count: a whole number of 32 bits, within the window."""
        if not whole(number) or not 0 <= number <= ROUND_MAX:
            return False
        low, high = self.bounds()
        return low < number <= high

    def bounds(self):
        """(low, high): the whole rounds admitted are those with low < number <= high
        (admits' rule, as bounds a data path compares a datagram's round with)."""
        if self.newest is None:
            return -1, ROUND_MAX
        return self.newest - self.kept, min(ROUND_MAX, self.newest + self.ahead)

    def begin(self, number):
        """Round `number` (admitted) is open: the window moves with it if it is newer."""
        if self.newest is None or number > self.newest:
            self.newest = number
