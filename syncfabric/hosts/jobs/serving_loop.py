"""One core's loop in the aggregator daemon: a thread that takes the datagrams of the
summing nodes it is given and sends their sums on, paced. The daemon runs one per core
(--cores N) and gives each its core's share of every part it serves (core_split). Other
threads never touch a loop's nodes: they ask the loop to run a call (call), and it runs
it between two batches."""

import logging
import os
import queue
import selectors
import threading
import time

from syncfabric.hosts.transport.paced_sender import next_due
from syncfabric.hosts.transport.receivers import Wakeup

LOG = logging.getLogger("syncfabric.aggregator")


class ServingLoop:
    def __init__(self, core, cores):
        self.core, self.cores = core, cores
        self.selector = selectors.DefaultSelector()
        self.wakeup = Wakeup()   # a call is waiting in the inbox
        self.selector.register(self.wakeup.sock, selectors.EVENT_READ, None)
        self.inbox = queue.SimpleQueue()
        self.nodes = []
        self.datagrams = 0   # taken so far, of every node
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="syncfabric-core%d" % core,
                                       daemon=True)

    def start(self):
        self.thread.start()

    def call(self, function, *args):
        """Run function(*args) in the loop's thread, between two batches."""
        self.inbox.put((function, args))
        self.wakeup.wake()

    def serve(self, nodes):
        self.call(self._add, nodes)

    def forget(self, nodes):
        """Stop serving `nodes` and close their sockets; returns an Event set once they
        are closed (a job served anew binds its ports again)."""
        closed = threading.Event()
        if self.thread.is_alive():
            self.call(self._remove, nodes, closed)
        else:   # not started, or ended: no thread selects on them
            self._remove(nodes, closed)
        return closed

    def stop(self):
        """Forget every node and end the thread; returns once it has ended."""
        self.call(self._end)
        self.thread.join()

    def cpu_s(self):
        """The CPU seconds the loop's thread has used so far (0 before it started)."""
        if self.thread.ident is None:
            return 0.0
        return time.clock_gettime(time.pthread_getcpuclockid(self.thread.ident))

    def _run(self):
        self._pin()
        try:
            while not self.stopping:
                try:
                    self._pump()
                except Exception:   # a bug in one datagram's handling: the others go on
                    LOG.exception("core %d: a batch failed", self.core)
        finally:
            self._remove(list(self.nodes))
            self.selector.close()
            self.wakeup.close()

    def _pin(self):
        """With several loops, loop c runs on the c-th CPU this process may use, so
        that two loops never share a CPU while another idles."""
        if self.cores > 1:
            cpus = sorted(os.sched_getaffinity(0))
            os.sched_setaffinity(0, {cpus[self.core % len(cpus)]})   # 0: this thread

    def _pump(self):
        """One batch: the datagrams of every node found ready, then the calls asked for
        meanwhile. A call run first could close a node the same select found ready (a
        job dropped), and its take() then read a closed socket."""
        calls = False
        for key, _events in self.selector.select(next_due(n.sums_out for n in self.nodes)):
            if key.data is None:
                calls = True
            else:
                self.datagrams += key.data.take()
        if calls:
            self._run_calls()
        for node in self.nodes:
            node.sums_out.send_due()

    def _run_calls(self):
        self.wakeup.clear()
        while not self.inbox.empty():
            function, args = self.inbox.get()
            function(*args)

    def _add(self, nodes):
        for node in nodes:
            self.selector.register(node.sock, selectors.EVENT_READ, node)
        self.nodes += nodes

    def _remove(self, nodes, closed=None):
        for node in nodes:
            if node in self.nodes:
                self.selector.unregister(node.sock)
                self.nodes.remove(node)
            node.sock.close()
        if closed is not None:
            closed.set()

    def _end(self):
        self.stopping = True
