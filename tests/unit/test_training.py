"""The training job's arithmetic: the MLP's gradient, the PS's step from gradients added
by aggregators and the PS (as datagrams, in the network's order) against the
single-process reference, and the reference reaching the accuracy target."""

import numpy as np
import pytest

from experiments.traffic.jobs import PAPERS_MODES as MODES
from experiments.traffic.round_check import ATOL, error_to_tolerance
from syncfabric.hosts.training.digits_mlp import (ReferenceRun, TrainingSetup, dataset, initial_parameters,
                                         layers, loss_and_gradient, minibatch, reference_step,
                                         sgd_update, worker_gradient)
from syncfabric.hosts.packets.gradient_wire import FragmentSums, fragment_count, fragment_packet

TINY = TrainingSetup(workers=3, hidden=8, batch=5)


def test_the_default_model_is_64_512_512_10_and_the_flat_vector_holds_every_layer():
    default = TrainingSetup(workers=8)
    assert default.layer_sizes == [64, 512, 512, 10]
    assert default.parameter_count == 301066 == len(initial_parameters(default))
    flat = initial_parameters(TINY)
    assert sum(w.size + b.size for w, b in layers(TINY, flat)) == len(flat) == TINY.parameter_count
    assert flat.dtype == np.float32


def test_the_gradient_matches_finite_differences():
    x_train, y_train = dataset(0)[:2]
    flat = initial_parameters(TINY).astype(np.float64)
    _loss, gradient = loss_and_gradient(TINY, flat, x_train[:6], y_train[:6])
    rng = np.random.default_rng(1)
    for index in rng.choice(len(flat), 25, replace=False):
        step = np.zeros_like(flat)
        step[index] = 1e-6
        plus = loss_and_gradient(TINY, flat + step, x_train[:6], y_train[:6])[0]
        minus = loss_and_gradient(TINY, flat - step, x_train[:6], y_train[:6])[0]
        assert gradient[index] == pytest.approx((plus - minus) / 2e-6, rel=1e-3, abs=1e-5)


def network_sum(gradients):
    """The PS's sum when an aggregator adds workers 0 and 1 and worker 2 goes straight to
    the PS, every fragment as a datagram, the aggregate arriving after worker 2."""
    floats = len(gradients[0])
    count = fragment_count(floats)
    aggregator = FragmentSums(7, 1, floats, [0b011] * count)
    ps = FragmentSums(7, 1, floats, [0b111] * count)
    for worker in (1, 0):
        for index in range(count):
            aggregator.add(fragment_packet(7, 1, index, 1 << worker, gradients[worker]))
    for index in range(count):
        ps.add(fragment_packet(7, 1, index, 0b100, gradients[2]))
        ps.add(fragment_packet(7, 1, index, 0b011, aggregator.total()))
    assert not ps.missing()
    return ps.total()


def test_each_distributed_round_equals_the_one_process_round_within_the_float32_tolerance():
    reference = ReferenceRun(TINY)
    data = dataset(TINY.seed)
    parameters, velocity = initial_parameters(TINY), np.zeros(TINY.parameter_count, np.float32)
    for number in range(1, 6):
        gradients = [worker_gradient(TINY, parameters, data, w, number)[1]
                     for w in range(TINY.workers)]
        _loss, *expected = reference_step(TINY, data, parameters, velocity, number)
        parameters, velocity = sgd_update(TINY, parameters, velocity, network_sum(gradients))
        assert error_to_tolerance(parameters, expected[0]) <= 1.0
        assert error_to_tolerance(velocity, expected[1]) <= 1.0
        reference.step()
    assert not np.array_equal(parameters, initial_parameters(TINY))
    assert np.max(np.abs(parameters - reference.parameters)) < 1e-5   # drift, not bounded


def test_the_tolerance_is_absolute_near_zero_and_relative_elsewhere():
    reference = np.array([0.0, 1.0], dtype=np.float32)
    assert error_to_tolerance(reference, reference) == 0
    assert error_to_tolerance(reference + np.float32([2 * ATOL, 0]), reference) == pytest.approx(2)
    assert error_to_tolerance(np.float32([0.0, 1.00005]), reference) < 1


def test_minibatches_are_seeded_and_drawn_from_the_worker_s_own_shard():
    setup = TrainingSetup(workers=4, batch=10)
    samples = np.arange(100)
    chosen = minibatch(setup, samples, samples, 2, 5)[0]
    assert len(set(chosen)) == 10 and all(sample % 4 == 2 for sample in chosen)
    assert np.array_equal(chosen, minibatch(setup, samples, samples, 2, 5)[0])
    assert not np.array_equal(chosen, minibatch(setup, samples, samples, 2, 6)[0])


def test_the_reference_job_reaches_90_percent_on_digits_within_30_rounds():
    reference = ReferenceRun(TrainingSetup(workers=8))
    accuracies = []
    for _ in range(30):
        reference.step()
        accuracies.append(reference.test_accuracy())
    assert accuracies[0] < 0.9 <= accuracies[-1]


def test_modes_combine_both_parameter_pushes_with_both_gradient_pushes():
    assert set(MODES) == {"unicast+ps", "unicast+ina", "multicast+ps", "multicast+ina"}
