"""The shards a worker's own host holds (job_roles.ShardNode), summed in the worker's
process: its I/O thread takes their datagrams and sends their sums, and after the
worker's last round serves them on while the other workers may still ask for sums again
(until they have been quiet SHARD_LINGER_S)."""

import selectors
import time

from syncfabric.hosts.jobs.job_roles import ShardNode
from syncfabric.hosts.transport.paced_sender import next_due
from syncfabric.hosts.transport.receivers import receiving_socket

SHARD_LINGER_S = 1.0   # the other workers quiet this long: they need its sums no more


class OwnShards:
    """Worker `name`'s shards of a job laid out as `layout`, on data path `path`, at the
    rates of `rates` (rate_following.RateSchedule); on_sum(round, fragment, sums) as a
    fragment's sum is whole (ShardNode's)."""

    def __init__(self, layout, name, path, rates, on_sum):
        data_ip = layout.addresses[name]
        self.nodes = [ShardNode(layout, shard, receiving_socket(data_ip, shard.port, reuse=False),
                                on_sum, path, rates=rates)
                      for shard in layout.shards_of(name)]
        self.by_index = {node.shard.index: node for node in self.nodes}
        self.heard_at = time.monotonic()   # when one of them last got a datagram

    def register(self, selector):
        """Take their datagrams as `selector` finds them ready."""
        for node in self.nodes:
            selector.register(node.sock, selectors.EVENT_READ,
                              lambda node=node: self._take(node))

    def _take(self, node):
        self.heard_at = time.monotonic()
        node.take()

    def senders(self):
        """Their sums' paced senders."""
        return [node.sums_out for node in self.nodes]

    def send_due(self):
        for node in self.nodes:
            node.sums_out.send_due()

    def lingering(self, closing_at, longest_s):
        """Whether they still serve, the worker closing since closing_at (monotonic):
        sums to send, or workers heard lately, for longest_s at most."""
        now = time.monotonic()
        busy = next_due(self.senders()) is not None or now - self.heard_at < SHARD_LINGER_S
        return bool(self.nodes) and busy and now - closing_at < longest_s
