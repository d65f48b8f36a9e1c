"""The streaming round's return on loopback: a PS returns each fragment's sum as soon as
it is complete, paced, and a worker's copy equals the PS's sum and the exact one."""

import socket
import time

import numpy as np

from experiments.traffic.gradient_wire import (FLOATS_PER_FRAGMENT, FragmentSums, exact_sum_check,
                                               fragment_count, fragment_packet, gradient)
from experiments.traffic.stream_return import (RETURN_PORT, ReturnReceiver, ReturnSender,
                                               shard_digest)

JOB, ROUND, SEED, WORKERS = 7, 3, 11, 3
FLOATS = 5 * FLOATS_PER_FRAGMENT - 17   # a short last fragment


def wait_for(receiver, condition, seconds=2.0):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        receiver.take()
        time.sleep(0.005)


def test_a_fragment_returns_once_complete_while_later_ones_are_still_arriving():
    count = fragment_count(FLOATS)
    sums = FragmentSums(JOB, ROUND, FLOATS, [2 ** WORKERS - 1] * count)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sender = ReturnSender(sock, ("127.0.0.1", RETURN_PORT), 100.0, sums.packet)
    receiver = ReturnReceiver([], "127.0.0.1", JOB, ROUND, FLOATS)
    gradients = [gradient(SEED, w, ROUND, FLOATS) for w in range(WORKERS)]
    try:
        for index in range(count):
            for worker in range(WORKERS):
                complete = sums.add(fragment_packet(JOB, ROUND, index, 1 << worker,
                                                    gradients[worker]))
                if complete is not None:
                    sender.push([complete])
            while sender.wait() is not None:
                time.sleep(sender.wait())
                sender.send_due()
            if index == 0:   # fragment 0 is back before fragment 1 has any worker
                wait_for(receiver, lambda: receiver.have[0])
                assert receiver.have.tolist() == [True] + [False] * (count - 1)
        wait_for(receiver, lambda: receiver.have.all())
        assert receiver.missing() == []
        total = sums.total()
        assert receiver.digests([[0, 2], [2, count]]) == [shard_digest(total, 0, 2),
                                                         shard_digest(total, 2, count)]
        assert np.array_equal(receiver.values[:FLOATS], total)
        assert exact_sum_check(receiver.values[:FLOATS], SEED, WORKERS, ROUND, FLOATS)[0]
    finally:
        receiver.close()
        sock.close()


class RecordingSocket:
    def __init__(self):
        self.sent = []

    def sendto(self, packet, _address):
        self.sent.append(len(packet))


def test_the_sender_paces_at_its_rate_and_a_missing_shard_has_no_digest():
    sock = RecordingSocket()
    sent = sock.sent
    sender = ReturnSender(sock, ("127.0.0.1", 9), 1.0, lambda i: bytes(1000))
    sender.push([0, 1, 2, 3, 0])   # a fragment queued twice is sent once
    sender.send_due()
    assert len(sent) == 1 and 0.007 < sender.wait() < 0.0085   # 1042 bytes at 1 Mbit/s
    while sender.wait() is not None:
        time.sleep(sender.wait())
        sender.send_due()
    assert len(sent) == 4
    receiver = ReturnReceiver([], "127.0.0.1", JOB, ROUND, FLOATS)
    try:
        receiver.place(0, np.ones(FLOATS_PER_FRAGMENT, dtype=np.float32))
        assert receiver.digests([[0, 1], [1, 2]])[1] is None
        assert receiver.missing() == [[1, fragment_count(FLOATS)]]
    finally:
        receiver.close()
