"""The "fabric" backend's case of PyTorch's own distributed tests (DistributedTest.
_DistTestBase, in the wheel as torch.testing._internal.distributed.distributed_test),
as torch_ucc makes its own: "fabric" added to the suite's plugin, ddp, subgroup and gpu
features ("gpu" is the suite's set of the usual backends, which its object-collective
tests require; its GPU tests still skip without GPUs), and each test's WORLD_SIZE ranks
started by a fork server that has imported this module once (tests/harness/
torch_suite.py runs them)."""

import os

os.environ.setdefault("BACKEND", "fabric")   # read when the suite is imported

import torch  # noqa: E402
import syncfabric.torch  # noqa: E402,F401  (registers "fabric")
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

# before the suite is imported: its decorators read the features as its tests are defined
for feature in ("plugin", "ddp", "subgroup", "gpu"):
    DistTestCases.backend_feature[feature].add("fabric")

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)

RANKS = torch.multiprocessing.get_context("forkserver")
RANKS.set_forkserver_preload([__name__])
PER_TEST = ("TEMP_DIR", "INIT_METHOD")   # what each test's setUp sets in the environment


class TestFabric(TestDistBackend, DistributedTest._DistTestBase):
    """The suite's tests, each in WORLD_SIZE ranks from the fork server. Spawned ranks
    (the suite's own test_distributed_spawn) import torch anew, seconds per rank and test
    on 2 cores; ranks forked from the runner, whose threads watch the last test's ranks,
    hung now and then."""

    def setUp(self):
        super().setUp()
        self._start_processes(rank_process)


def rank_process(target, name, args, kwargs):
    """A rank of the running test, from the fork server: with the test's own TEMP_DIR
    and INIT_METHOD (the server's environment is the first test's)."""
    environment = {key: os.environ[key] for key in PER_TEST}
    return RANKS.Process(target=in_environment, name=name,
                         args=(environment, target, *args), kwargs=kwargs)


def in_environment(environment, target, *args, **kwargs):
    os.environ.update(environment)
    return target(*args, **kwargs)
