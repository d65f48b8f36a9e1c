"""The streaming round's return on loopback: a PS returns each fragment's sum as soon as
it is complete, paced, and a worker's copy equals the PS's sum and the exact one."""

import socket
import time

import numpy as np

from syncfabric.hosts.gradient_wire import (FLOATS_PER_FRAGMENT, FragmentSums, exact_sum_check,
                                            fragment_count, fragment_packet, gradient)
from syncfabric.hosts.stream_return import RETURN_PORT, ReturnReceiver, ReturnSender, shard_digest

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


def test_a_step_from_the_returned_shards_equals_the_one_process_round():
    from experiments.traffic.training import error_to_tolerance
    from syncfabric.hosts.digits_mlp import (TrainingSetup, dataset, initial_parameters,
                                             one_blas_thread, reference_step, sgd_update,
                                             worker_gradient)
    from syncfabric.decisions.model_shards import fragment_ranges
    setup = TrainingSetup(workers=3, hidden=8)
    data = dataset(setup.seed)
    floats = setup.parameter_count
    count = fragment_count(floats)
    parameters, velocity = initial_parameters(setup), np.zeros(floats, dtype=np.float32)
    with one_blas_thread():
        gradients = [worker_gradient(setup, parameters, data, w, 1)[1] for w in range(3)]
        _loss, *expected = reference_step(setup, data, parameters, velocity, 1)
    shards = fragment_ranges({"s1": 0.5, "s2": 0.5}, count)
    receiver = ReturnReceiver([], "127.0.0.1", JOB, 1, floats)
    try:
        for first, last in shards.values():   # each shard's PS sums its own range
            sums = FragmentSums(JOB, 1, floats, [7 if first <= i < last else 0 for i in range(count)])
            for index in range(first, last):
                for worker in (2, 0, 1):   # arriving in another order than the reference's
                    complete = sums.add(fragment_packet(JOB, 1, index, 1 << worker,
                                                        gradients[worker]))
                start = complete * FLOATS_PER_FRAGMENT
                receiver.place(complete, sums.total()[start:start + FLOATS_PER_FRAGMENT])
        assert receiver.missing() == [] and receiver.completed_at is not None
        state = sgd_update(setup, parameters, velocity, receiver.values[:floats])
    finally:
        receiver.close()
    assert max(error_to_tolerance(got, want) for got, want in zip(state, expected)) <= 1.0
