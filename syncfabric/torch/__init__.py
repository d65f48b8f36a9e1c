"""PyTorch through the fabric, two ways.

As a torch.distributed backend (backend.py), with no other change to the program:

    import syncfabric.torch
    dist.init_process_group("fabric")        # SYNCFABRIC_CONTROLLER says where

or as DDP's communication hook beside a Gloo group, one added line:

    dist.init_process_group("gloo")
    model = DistributedDataParallel(model)
    fabric_hook(model, controller="http://CONTROLLER:8080")

Every gradient bucket is then summed by the job's streaming round (hook.py); the job is
made when the hook is registered and released at destroy_process_group or exit
(registration.py). docs/pytorch.md says more.
"""

from syncfabric.torch.backend import FabricOptions, register
from syncfabric.torch.hook import FabricHookError, fabric_hook

register()

__all__ = ["fabric_hook", "FabricHookError", "FabricOptions"]
