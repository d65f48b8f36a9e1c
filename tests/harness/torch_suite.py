"""PyTorch's own distributed tests (DistributedTest._DistTestBase, shipped in the wheel
as torch.testing._internal.distributed.distributed_test) run with the "fabric" backend
(tests/harness/torch_suite_cases.py): each test's WORLD_SIZE ranks init_process_group
with it over a file:// rendezvous. The controller and each rank's host come from the
environment (SYNCFABRIC_CONTROLLER, SYNCFABRIC_HOSTS, SYNCFABRIC_MIN_BYTES), as under
torchrun. Run by tests/integration/test_torch_suite.py:

    WORLD_SIZE=2 SYNCFABRIC_CONTROLLER=http://... SYNCFABRIC_HOSTS=w1,w2 \\
        python -m tests.harness.torch_suite test_all_reduce_sum test_broadcast ...

It prints one JSON line: each named test's outcome ("passed", "skipped: why",
"failed: the end of its traceback")."""

import json
import sys
import unittest

from tests.harness.torch_suite_cases import TestFabric


class Outcomes(unittest.TestResult):
    """Each test's outcome by its method's name."""

    def __init__(self):
        super().__init__()
        self.outcomes = {}

    def addSuccess(self, test):
        self.outcomes[test._testMethodName] = "passed"

    def addSkip(self, test, reason):
        self.outcomes[test._testMethodName] = "skipped: %s" % reason

    def addError(self, test, err):
        self.outcomes[test._testMethodName] = "failed: %s" % self._exc_info_to_string(
            err, test)[-3000:]

    addFailure = addError


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if len(sys.argv) > 1 else 2)
    suite = unittest.TestSuite(TestFabric(name) for name in sys.argv[1:])
    result = Outcomes()
    suite.run(result)
    print(json.dumps(result.outcomes), flush=True)


if __name__ == "__main__":
    main()
