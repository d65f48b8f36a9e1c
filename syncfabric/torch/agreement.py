"""How a group's ranks decide together (registration.py): each rank's value, gathered in
rank order on every rank, so that a problem on any rank is every rank's.

The hook agrees over its process group's own collectives (GroupAgreement): it is
registered before training, outside any collective. The backend makes its job inside
the group's first all-reduce the fabric carries, which DDP calls inside the backward
pass; a collective of that group there (Gloo's all-gather) hung now and then on every
rank, so it agrees over the group's store instead (StoreAgreement), as torch's own
rendezvous does."""

import pickle

import torch.distributed as dist


class GroupAgreement:
    """Agreement over a process group's collectives (all_gather_object)."""

    def __init__(self, group):
        self.group = group
        self.rank, self.size = dist.get_rank(group), dist.get_world_size(group)

    def gathered(self, value):
        """Every rank's `value`, in rank order (every rank calls it)."""
        values = [None] * self.size
        dist.all_gather_object(values, value, group=self.group)
        return values


class StoreAgreement:
    """Agreement over a group's store (torch.distributed.Store: its keys are the group's
    own), rank `rank` of `size`; each store.get waits, as long as the store's timeout."""
    PREFIX = "syncfabric"

    def __init__(self, store, rank, size):
        self.store, self.rank, self.size = store, rank, size
        self.asked = 0   # how many times the ranks agreed: each time's keys are new

    def gathered(self, value):
        """Every rank's `value`, in rank order (every rank calls it)."""
        self.asked += 1
        key = "%s/%d/" % (self.PREFIX, self.asked)
        self.store.set(key + str(self.rank), pickle.dumps(value))
        return [pickle.loads(self.store.get(key + str(rank))) for rank in range(self.size)]
