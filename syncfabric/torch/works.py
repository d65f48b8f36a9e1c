"""The Works the fabric's process group returns (backend.py): one for a collective
through a job's rounds, and one for several collectives as one (the functional
collectives' coalesced calls)."""

import torch
import torch.distributed as dist


class FabricWork(dist.Work):
    """A collective through the fabric as torch.distributed waits for it. A failed
    round's error is raised by wait() (torch's own Work made from a Future would return
    as if done), not carried by the Future: DDP with no hook died of SIGSEGV on a Future
    that ended in an error. Its Future then ends with the outputs left as they were, and
    the group's next collective raises the error at once."""

    def __init__(self, future):
        super().__init__()
        self.future = future   # a torch Future of [the tensor]
        self.error = None      # the round's, if it failed

    def wait(self, timeout=None):
        self.future.wait()
        if self.error is not None:
            raise self.error
        return True

    def get_future(self):
        return self.future

    def is_completed(self):
        return self.future.done()


class CoalescedWork(dist.Work):
    """Several collectives' Works as one: wait() waits for each (raising the first
    error), and its Future ends with `outputs` once every one's has."""

    def __init__(self, works, outputs):
        super().__init__()
        self.works, self.outputs = works, outputs

    def wait(self, timeout=None):
        for work in self.works:
            work.wait()
        return True

    def get_future(self):
        futures = torch.futures.collect_all([work.get_future() for work in self.works])
        return futures.then(lambda _done: self.outputs)

    def is_completed(self):
        return all(work.is_completed() for work in self.works)
