"""A daemon's serving loop (hosts/jobs/serving_loop.py) runs the calls other threads ask
for between two batches: never before the datagrams of a node the same select found
ready, whose socket such a call may close."""

from types import SimpleNamespace

from syncfabric.hosts.jobs.serving_loop import ServingLoop


class ReadyNode:
    """A node whose socket has a datagram waiting; take() on it once closed fails, as a
    read of a closed socket does (EBADF)."""

    def __init__(self):
        self.sock = SimpleNamespace(closed=False, close=self.close)
        self.sums_out = SimpleNamespace(wait=lambda: None, send_due=lambda: None)

    def close(self):
        self.sock.closed = True

    def take(self):
        if self.sock.closed:
            raise OSError(9, "Bad file descriptor")
        return 1


class OrderedSelector:
    """Says the wakeup and then the node are ready, in that order."""

    def __init__(self, node):
        self.node = node

    def select(self, _timeout):
        return [(SimpleNamespace(data=None), None), (SimpleNamespace(data=self.node), None)]

    def unregister(self, _sock):
        pass


def test_a_node_found_ready_is_read_before_a_call_closes_it():
    loop = ServingLoop(0, 1)
    try:
        node = ReadyNode()
        loop.nodes.append(node)
        real_selector, loop.selector = loop.selector, OrderedSelector(node)
        loop.inbox.put((loop._remove, ([node],)))   # the daemon dropped its job meanwhile
        loop._pump()
        assert loop.datagrams == 1 and node.sock.closed and loop.nodes == []
    finally:
        real_selector.close()
        loop.wakeup.close()
