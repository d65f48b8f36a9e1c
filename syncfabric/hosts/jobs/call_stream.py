"""Calls of any length through a job's rounds (FabricWorker.allreduce_async).

A job's rounds are all of one length, the job's model_bytes / 4 floats, set when the
job is made: shards, aggregators and workers know every fragment of a round before it
comes. A call takes the next floats of the rounds, from the next fragment's edge of
the round being filled: a call of a round's length at a round's edge is that round, a
shorter one shares its round with the calls after it, and a longer one goes on into
the next rounds. The rest of a call's last fragment is zeros, so that the fragment
leaves at once rather than wait for the next call: a call costs at most a fragment
more than its floats. Where a call leaves at most a sixteenth of its round
(SKIPPED_ROOM), that room is zeros too and the next call starts the next round: a
program that calls the same sizes over and over (DDP's buckets each step) then has a
round of its own each time, which leaves at once and is whole when its last call is,
where a stream that went on across rounds would cut each time at a new place (its
zeros move it along). Every worker makes the same calls in the same order, so
each call's floats lie at the same places of the same rounds on every worker.
"""

import queue
import threading
from concurrent.futures import Future

import numpy as np

SKIPPED_ROOM = 16   # a round's room at most 1/SKIPPED_ROOM of it is skipped (module doc)


class CallStream:
    """Where calls go in the rounds of a worker (filling: worker_rounds.RoundFilling of
    a job laid out as `layout`); `lock`: held by a call from pieces() until its pieces are
    taken, so that calls from several threads do not interleave."""

    def __init__(self, layout, filling):
        self.floats, self.per_fragment, self.filling = layout.floats, layout.per_fragment, filling
        self.lock = threading.Lock()
        self.skipped = self.floats // SKIPPED_ROOM   # the most room skipped
        # a fragment's rest, or a skipped room
        self.zeros = np.zeros(max(layout.per_fragment, self.skipped), dtype=np.float32)

    def pieces(self, values):
        """[(start in its round, floats, whether they are the call's)] of `values` one
        after another through the rounds, from the round being filled on: the call's own
        floats, zeros to the edge of its last fragment, and zeros for the room it leaves
        if that is little."""
        at, given, found = self.filling.stream_offset(), 0, []
        while given < len(values):
            taken = min(self.floats - at, len(values) - given)
            found.append((at, values[given:given + taken], True))
            given, at = given + taken, at + taken
            edge = min(self.floats, -(-at // self.per_fragment) * self.per_fragment)
            room = self.floats - at
            if 0 < room <= self.skipped:
                found.append((at, self.zeros[:room], False))
            elif edge > at:
                found.append((at, self.zeros[:edge - at], False))
            at = 0   # more values follow only if this round is whole: from the next one's start
        return found

    def round_begun(self):
        """Whether the round being filled has floats already (the next call goes on in
        it), rather than the next call beginning a round."""
        return self.filling.stream_offset() > 0


class SubmittedPieces:
    """The pieces of calls (FabricWorker.reduce_part's) waiting for the worker's I/O
    thread, in order. Each begins once its round is fewer than `in_flight` past the
    oldest round still open: a call over many rounds waits for the oldest to come back
    rather than run past the rounds a summing node keeps."""

    def __init__(self, in_flight):
        self.in_flight = in_flight
        self.waiting = queue.Queue()
        self.held = None   # the next piece, taken out of `waiting`, whose round may not begin

    def put(self, piece):
        """piece: (its round's number, ...the rest of FabricWorker._contribute's arguments)."""
        self.waiting.put(piece)

    def ready(self, open_rounds):
        """The pieces that may begin now, in order, given the rounds open (numbers)."""
        while True:
            if self.held is None:
                if self.waiting.empty():
                    return
                self.held = self.waiting.get()
            number = self.held[0]
            if number - min(open_rounds, default=number) >= self.in_flight:
                return
            piece, self.held = self.held, None
            yield piece


def finished(result):
    """A Future that has ended with `result`."""
    future = Future()
    future.set_result(result)
    return future


def joined(parts):
    """A Future of the results of a call's own parts one after another (parts: [(Future,
    whether it is the call's own)], from CallStream.pieces), once every part ended, the
    zeros too: the stats of a round the call ends are filed by then (the first error if
    any failed); the one Future itself if there is one."""
    futures = [future for future, _own in parts]
    if len(futures) == 1:
        return futures[0]
    whole, left, lock = Future(), [len(futures)], threading.Lock()

    def ended(_future):
        with lock:
            left[0] -= 1
            if left[0]:
                return
        failed = [future.exception() for future in futures if future.exception() is not None]
        if failed:
            whole.set_exception(failed[0])
        else:
            whole.set_result(np.concatenate([future.result() for future, own in parts if own]))
    for future in futures:
        future.add_done_callback(ended)
    return whole
