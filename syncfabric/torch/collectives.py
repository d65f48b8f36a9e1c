"""Each collective the fabric carries, as float32s through a job's rounds (RoundCall):
what this rank gives, and how the summed values come back into the call's outputs.

Every one is a sum, so each rank's part is exact where the others give -0.0 (x + -0.0
is x, bit for bit, for every float32 x, -0.0 included; a shard copies the first value
it gets and adds the rest):
- all-reduce (and coalesced: the tensors end to end): every rank gives its tensor;
- broadcast: the root gives its tensor, the others -0.0;
- all-gather: each rank gives its input at its own slice of the output, -0.0 elsewhere;
- reduce-scatter: every rank gives its whole input, and keeps its own slice of the sum.
All-gather and reduce-scatter thus carry the whole output (input) through a round:
per host, a ring's bytes plus one slice for all-gather, twice a ring's for
reduce-scatter. A group sends its all-gathers and reduce-scatters of min_bytes and more
through a gather job and a scatter job of its own instead, at a ring's bytes
(gather_rounds.py, scatter_rounds.py); this form is for the smaller ones that go on in
a round already begun, for a call that is a group's first eligible one (it makes the
group's job), and for a group whose gather or scatter job was refused or turned off.

A call is eligible, here and on every rank alike from its arguments alone, when its
tensors are contiguous CPU tensors of one dtype the wire carries (float16 and bfloat16
widened to float32), consistent in size, its op (where it has one) SUM, AVG or
PREMUL_SUM, and the round's values at least min_bytes as float32. Else each function
returns None, and the call goes to Gloo (which also says what is wrong with a misuse).
"""

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.distributed as dist

from syncfabric.torch.registration import WIRE_DTYPES

NEGATIVE_ZERO = -0.0   # what a rank gives where its values are not in the sum


@dataclass
class RoundCall:
    """One collective through the fabric: this rank's float32 `values`, the call's
    `outputs` (the Work's result), and place(total), which writes the ranks' sum (a
    float32 tensor as long as `values`) into them; `job`: the group's job whose rounds
    carry it (backend.GroupJob; None: the group's all-reduce job)."""
    values: np.ndarray
    outputs: list
    place: Callable
    job: object = None


def on_the_wire(tensors):
    """Whether `tensors` (one or more) are contiguous CPU tensors of one dtype the wire
    carries."""
    dtypes = {tensor.dtype for tensor in tensors}
    return len(dtypes) == 1 and dtypes <= set(WIRE_DTYPES) and all(
        tensor.device.type == "cpu" and tensor.layout == torch.strided
        and tensor.is_contiguous() for tensor in tensors)


def scaling(op, size):
    """What an op does around the sum, as (premultiply, divide): (1.0, 1) for SUM, (1.0,
    size) for AVG, (factor, 1) for PREMUL_SUM with a number (or one-element tensor)
    factor; None for any other op."""
    if op == dist.ReduceOp.SUM:
        return 1.0, 1
    if op == dist.ReduceOp.AVG:
        return 1.0, size
    if op == dist.ReduceOp.PREMUL_SUM:
        factor = getattr(op, "factor", None)
        if isinstance(factor, torch.Tensor) and factor.numel() == 1:
            factor = factor.item()
        if isinstance(factor, (int, float)):
            return float(factor), 1
    return None


def floats_of(tensors, factor=1.0):
    """The tensors end to end as float32 numpy values (a copy where they are not
    float32, or where they are several or premultiplied; a view of a lone float32)."""
    flat = [tensor.detach().reshape(-1).to(torch.float32) for tensor in tensors]
    values = flat[0] if len(flat) == 1 else torch.cat(flat)
    if factor != 1.0:
        values = values * factor
    return values.numpy()


def write_back(total, outputs, divide=1):
    """Copy `total` (float32, as long as the outputs together), divided by `divide`,
    into the outputs in order, each in its dtype and shape."""
    if divide != 1:
        total = total / divide
    start = 0
    for output in outputs:
        output.copy_(total[start:start + output.numel()].view(output.shape))
        start += output.numel()


def big_enough(floats, min_bytes):
    return 4 * floats >= min_bytes


def allreduce_call(tensors, op, size, min_bytes, coalesced=False):
    """dist.all_reduce (one tensor) or, `coalesced`, its coalesced form (several, summed
    end to end). Several tensors in the plain form are Gloo's (None): Gloo gives each the
    sum of them all, and refuses tensors of two sizes, which end to end would not."""
    scale = scaling(op, size)
    if not tensors or (len(tensors) > 1 and not coalesced) or scale is None \
            or not on_the_wire(tensors) \
            or not big_enough(sum(t.numel() for t in tensors), min_bytes):
        return None
    factor, divide = scale
    return RoundCall(floats_of(tensors, factor), list(tensors),
                     lambda total: write_back(total, tensors, divide))


def broadcast_call(tensors, root, rank, min_bytes):
    """dist.broadcast of one tensor from rank `root`: the root's values, -0.0 elsewhere."""
    if len(tensors) != 1 or not on_the_wire(tensors) or not big_enough(tensors[0].numel(),
                                                                          min_bytes):
        return None
    tensor = tensors[0]
    if rank == root:
        return RoundCall(floats_of(tensors), [tensor], lambda _total: None)
    values = np.full(tensor.numel(), NEGATIVE_ZERO, dtype=np.float32)
    return RoundCall(values, [tensor], lambda total: write_back(total, [tensor]))


def rank_slice(outputs, rank, floats):
    """A flat view of rank `rank`'s `floats` elements of an all-gather's outputs (one
    tensor of every rank's end to end, or one tensor a rank)."""
    if len(outputs) == 1:
        return outputs[0].view(-1).narrow(0, rank * floats, floats)
    return outputs[rank].view(-1)


def allgather_eligible(outputs, tensor, size, min_bytes):
    """Whether dist.all_gather (`outputs` a list of `size` tensors like `tensor`) or
    all_gather_into_tensor (`outputs` one tensor of `size` times its elements) goes
    through the fabric."""
    floats = tensor.numel()
    return on_the_wire([tensor, *outputs]) \
        and sum(o.numel() for o in outputs) == size * floats \
        and (len(outputs) == 1 or all(o.numel() == floats for o in outputs)) \
        and big_enough(size * floats, min_bytes)


def allgather_call(outputs, tensor, rank, size, min_bytes):
    """An all-gather (allgather_eligible's arguments) through a round: this rank's values
    at its own slice of the output, -0.0 elsewhere."""
    if not allgather_eligible(outputs, tensor, size, min_bytes):
        return None
    floats = tensor.numel()
    values = np.full(size * floats, NEGATIVE_ZERO, dtype=np.float32)
    values[rank * floats:(rank + 1) * floats] = floats_of([tensor])
    return RoundCall(values, list(outputs), lambda total: write_back(total, outputs))


def reduce_scatter_eligible(output, inputs, op, size, min_bytes):
    """Whether dist.reduce_scatter (`inputs` a list of `size` tensors like `output`) or
    reduce_scatter_tensor (`inputs` one tensor of `size` times its elements) goes
    through the fabric: its op's (premultiply, divide) (scaling) if so, else None."""
    scale = scaling(op, size)
    floats = output.numel()
    if scale is None or not on_the_wire([output, *inputs]) \
            or sum(i.numel() for i in inputs) != size * floats \
            or (len(inputs) > 1 and any(i.numel() != floats for i in inputs)) \
            or not big_enough(size * floats, min_bytes):
        return None
    return scale


def reduce_scatter_call(output, inputs, op, rank, size, min_bytes):
    """A reduce-scatter (reduce_scatter_eligible's arguments) through a round: the whole
    input summed, this rank's slice of the sum kept."""
    scale = reduce_scatter_eligible(output, inputs, op, size, min_bytes)
    if scale is None:
        return None
    factor, divide = scale
    floats = output.numel()
    mine = slice(rank * floats, (rank + 1) * floats)
    return RoundCall(floats_of(inputs, factor), [output],
                     lambda total: write_back(total[mine], [output], divide))
