"""PyTorch through the fabric: one added line to a DistributedDataParallel script.

    dist.init_process_group("gloo")
    model = DistributedDataParallel(model)
    fabric_hook(model, controller="http://CONTROLLER:8080")

Every gradient bucket is then summed by the job's streaming round (hook.py); the job is
made when the hook is registered and released at destroy_process_group or exit
(registration.py). docs/pytorch.md says more.
"""

from syncfabric.torch.hook import FabricHookError, fabric_hook

__all__ = ["fabric_hook", "FabricHookError"]
