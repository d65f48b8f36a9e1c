"""A training round checked against one process, after it ran (untimed): the job's
parameters and momentum against the same round computed in one process from the job's
previous state (digits_mlp.reference_step, with the workers' BLAS settings), |x - x_ref|
<= ATOL + RTOL |x_ref| for every element. The two differ only in the order in which
the network adds the gradients in float32 (about 1e-7 here, 1% of the tolerance).

The whole job is also run in one process from the start (digits_mlp.ReferenceRun), for
its test accuracy and the largest parameter difference from it (drift). Drift has no
fixed bound: once a rounding difference flips a ReLU for one sample, the two runs take
different, equally valid steps (seen here: under 1e-7 for 16 rounds, then 4e-4 by
round 30); the test accuracy stayed the same.
"""

import numpy as np

from syncfabric.hosts.training.digits_mlp import (ReferenceRun, accuracy, initial_parameters,
                                         reference_step)

ATOL, RTOL = 1e-6, 1e-4


def error_to_tolerance(values, reference):
    """max over elements of |x - x_ref| / (ATOL + RTOL |x_ref|); the check is <= 1."""
    return float(np.max(np.abs(values - reference) / (ATOL + RTOL * np.abs(reference))))


class RoundCheck:
    """After each round (untimed): the job's state against the same round computed in one
    process from its previous state, and against the whole job run in one process
    (module doc)."""

    def __init__(self, setup):
        self.setup = setup
        self.reference = ReferenceRun(setup)
        self.state = (initial_parameters(setup), np.zeros(setup.parameter_count, dtype=np.float32))

    def __call__(self, number, state):
        """The check's columns for round `number`, whose result is `state` (params, velocity)."""
        data = self.reference.data
        _loss, *expected = reference_step(self.setup, data, *self.state, number)
        self.state = state
        ratio = max(error_to_tolerance(got, want) for got, want in zip(state, expected))
        return {"reference_loss": self.reference.step(),
                "test_accuracy": accuracy(self.setup, state[0], data[2], data[3]),
                "reference_accuracy": self.reference.test_accuracy(), "error_to_tolerance": ratio,
                "verified": ratio <= 1.0,
                "drift": float(np.max(np.abs(state[0] - self.reference.parameters)))}
