"""The training job's arithmetic: scikit-learn's digits (shipped with the package, no
download), a float32 MLP in numpy, and synchronous data-parallel SGD with momentum.

The distributed job (syncfabric/hosts/training/job_training.py) and its single-process
reference (ReferenceRun) call the same functions, so any difference between them
comes from the network's arithmetic: the order in which aggregators and the PS
add the workers' gradients. Every float is float32.

Gradients are computed with one BLAS thread everywhere (one_blas_thread): the
same parameters then give bit-identical gradients in every process. With
another thread count BLAS adds in another order, and where that changes the
last bit of a pre-activation at 0 it flips a ReLU (round 17 of the default
job: the gradient then differs by 4e-4).

Round r: every worker w takes a seeded minibatch of its shard (seed, w, r), and
computes the mean cross-entropy gradient at the parameters the PS sent; the PS
adds the n gradients, and updates v = momentum * v + sum / n, p = p - lr * v.
"""

from dataclasses import dataclass

import numpy as np
from sklearn.datasets import load_digits
from threadpoolctl import threadpool_limits

INPUTS, CLASSES = 64, 10
TEST_FRACTION = 0.2


@dataclass(frozen=True)
class TrainingSetup:
    """What every process must agree on. hidden=512 gives 64-512-512-10, 301,066 float32
    parameters (1.2 MB): at 20 Mbit/s a copy takes 0.5 s, a gradient 5 ms to compute."""
    workers: int
    hidden: int = 512
    batch: int = 32               # samples per worker per round
    learning_rate: float = 0.1
    momentum: float = 0.9
    seed: int = 0

    @property
    def layer_sizes(self):
        return [INPUTS, self.hidden, self.hidden, CLASSES]

    @property
    def parameter_count(self):
        sizes = self.layer_sizes
        return sum(a * b + b for a, b in zip(sizes, sizes[1:]))

    def as_dict(self):
        return dict(self.__dict__)


def one_blas_thread():
    """Context: numpy's BLAS on one thread (see the module doc)."""
    return threadpool_limits(1)


def dataset(seed):
    """(x_train, y_train, x_test, y_test): digits scaled to [0, 1], split by `seed`."""
    digits = load_digits()
    order = np.random.default_rng(seed).permutation(len(digits.target))
    x = (digits.data[order] / 16.0).astype(np.float32)
    y = digits.target[order]
    test = int(len(y) * TEST_FRACTION)
    return x[test:], y[test:], x[:test], y[:test]


def minibatch(setup, x_train, y_train, worker, number):
    """Worker `worker`'s samples in round `number`: seeded, from its shard (every
    worker-th training sample)."""
    shard = np.arange(worker, len(y_train), setup.workers)
    chosen = np.random.default_rng([setup.seed, worker, number]).choice(shard, setup.batch,
                                                                        replace=False)
    return x_train[chosen], y_train[chosen]


def initial_parameters(setup):
    """He-initialised weights, zero biases, as one flat float32 vector."""
    rng = np.random.default_rng([setup.seed, 2**31])
    pieces = []
    for fan_in, fan_out in zip(setup.layer_sizes, setup.layer_sizes[1:]):
        pieces.append((rng.standard_normal((fan_in, fan_out)) * np.sqrt(2.0 / fan_in)).ravel())
        pieces.append(np.zeros(fan_out))
    return np.concatenate(pieces).astype(np.float32)


def layers(setup, flat):
    """[(W, b)] as views into the flat vector."""
    result, start = [], 0
    for fan_in, fan_out in zip(setup.layer_sizes, setup.layer_sizes[1:]):
        weights = flat[start:start + fan_in * fan_out].reshape(fan_in, fan_out)
        start += fan_in * fan_out
        result.append((weights, flat[start:start + fan_out]))
        start += fan_out
    return result


def _forward(setup, flat, x):
    activations = [x]
    params = layers(setup, flat)
    for index, (weights, bias) in enumerate(params):
        z = activations[-1] @ weights + bias
        activations.append(z if index == len(params) - 1 else np.maximum(z, 0))
    return activations


def loss_and_gradient(setup, flat, x, y):
    """Mean cross-entropy of the batch and its gradient (flat float32)."""
    activations = _forward(setup, flat, x)
    logits = activations[-1]
    shifted = logits - logits.max(axis=1, keepdims=True)
    probabilities = np.exp(shifted)
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    loss = float(-np.mean(np.log(probabilities[np.arange(len(y)), y] + 1e-12)))
    delta = probabilities
    delta[np.arange(len(y)), y] -= 1
    delta /= len(y)
    pieces = []
    for index in range(len(activations) - 2, -1, -1):
        weights, _bias = layers(setup, flat)[index]
        pieces[:0] = [(activations[index].T @ delta).ravel(), delta.sum(axis=0)]
        if index:
            delta = (delta @ weights.T) * (activations[index] > 0)
    return loss, np.concatenate(pieces).astype(np.float32)


def accuracy(setup, flat, x, y):
    return float(np.mean(np.argmax(_forward(setup, flat, x)[-1], axis=1) == y))


def worker_gradient(setup, flat, data, worker, number):
    """(loss, gradient) of worker `worker` in round `number`; data = dataset(seed)."""
    x, y = minibatch(setup, data[0], data[1], worker, number)
    return loss_and_gradient(setup, flat, x, y)


def sgd_update(setup, flat, velocity, gradient_sum):
    """The PS's step from the sum of the workers' gradients; returns (params, velocity)."""
    velocity = (np.float32(setup.momentum) * velocity
                + gradient_sum / np.float32(setup.workers)).astype(np.float32)
    return (flat - np.float32(setup.learning_rate) * velocity).astype(np.float32), velocity


def reference_step(setup, data, flat, velocity, number):
    """Round `number` in one process from the PS's state (flat, velocity): every worker's
    gradient, added in worker order; returns (mean batch loss, params, velocity)."""
    total = np.zeros_like(flat)
    losses = []
    for worker in range(setup.workers):
        loss, gradient = worker_gradient(setup, flat, data, worker, number)
        total += gradient
        losses.append(loss)
    return (float(np.mean(losses)), *sgd_update(setup, flat, velocity, total))


class ReferenceRun:
    """The whole job in one process, from the initial parameters."""

    def __init__(self, setup):
        self.setup = setup
        self.data = dataset(setup.seed)
        self.parameters = initial_parameters(setup)
        self.velocity = np.zeros_like(self.parameters)
        self.rounds = 0

    def step(self):
        """One round; returns the mean of the workers' batch losses."""
        self.rounds += 1
        loss, self.parameters, self.velocity = reference_step(
            self.setup, self.data, self.parameters, self.velocity, self.rounds)
        return loss

    def test_accuracy(self, flat=None):
        return accuracy(self.setup, self.parameters if flat is None else flat, self.data[2],
                        self.data[3])
