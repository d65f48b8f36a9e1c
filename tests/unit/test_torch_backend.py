"""init_process_group("fabric") on loopback with no fabric (tests/harness/backend_ranks.py
as processes, the controller stand-in of tests/harness/loopback_jobs.py): eligible
all-reduces go through the job's rounds and equal Gloo's bit for bit, in every dtype the
wire carries, synchronous and not, longer than a round or not; the rest goes to Gloo;
the job is released at destroy_process_group; all-gathers and reduce-scatters go through
a gather job and a scatter job of their own by default, or the job's rounds where one is
refused or turned off; a refused
job, or no controller, leaves every rank on Gloo alike; a lost host fails the call, and
every later one at once; DDP with no hook trains over it as over Gloo, and FSDP2 and
HSDP end bit for bit as over Gloo.
Which calls are eligible is decided from the arguments alone."""

import numpy as np
import pytest
import torch
import torch.distributed as dist

from syncfabric.torch.backend import FabricOptions, create_group
from syncfabric.torch.collectives import (allgather_call, allreduce_call, broadcast_call,
                                          reduce_scatter_call)
from tests.harness.loopback_jobs import StubController, assert_identical_at_every_step, run_ranks

HOSTS = "w1,w2"
CAPACITY_BYTES = 400_000   # backend_ranks' default: its longest call takes three rounds
OVER_FABRIC = 6            # of backend_ranks.CALLS: the six the fabric carries
# backend_ranks.compare_collectives: all through the fabric
COLLECTIVES = {"broadcast", "broadcast_bf16", "all_gather", "all_gather_into_tensor",
               "all_gather_longer", "all_gather_shorter", "reduce_scatter",
               "reduce_scatter_tensor_avg_fp16", "reduce_scatter_longer",
               "all_reduce_coalesced", "premul_sum"}
OVER_GLOO = {"reduce_scatter_tensor_over_gloo",   # and in a group of its own, through Gloo
             "premul_sum_refused_changes_nothing"}   # and one Gloo refuses


@pytest.fixture
def stub(request):
    controller = StubController(refuse=getattr(request, "param", None))
    yield controller
    controller.close()


def ranks(stub, *extra, controller=None):
    answers = run_ranks(2, ["--controller", stub.url if controller is None else controller,
                            "--hosts", HOSTS, *extra], module="tests.harness.backend_ranks")
    for answer in answers:
        assert answer["error"] is None, answer.get("traceback")
    return answers


def compared(stub, *extra, controller=None):
    answers = ranks(stub, *extra, controller=controller)
    for answer in answers:
        assert answer["verdicts"] and all(answer["verdicts"]), answer["verdicts"]
        assert set(answer["collectives"]) == COLLECTIVES | OVER_GLOO, answer["collectives"]
        assert all(answer["collectives"].values()), answer["collectives"]
    return answers


@pytest.mark.usefixtures("each_datapath")
@pytest.mark.parametrize("side_jobs", [False, True])
def test_eligible_collectives_go_through_the_fabric_and_equal_gloos_bit_for_bit(stub,
                                                                              side_jobs):
    """All-reduces, broadcasts (every kind of float, -0.0 and NaN included), all-gathers
    and reduce-scatters (through the job's rounds, or a gather job's and a scatter
    job's), and coalesced all-reduces; PREMUL_SUM against the sum itself."""
    answers = compared(stub, *(("--gather-job", "--scatter-job") if side_jobs
                               else ("--no-gather-job", "--no-scatter-job")))
    for answer in answers:
        assert answer["gloo_only"] is None
        assert answer["counts"]["fabric"] == OVER_FABRIC + len(COLLECTIVES)
        assert answer["counts"]["gloo"] >= 3
    # the all-reduce job, then the gather job of the first all-gather and the scatter
    # job of the first reduce-scatter: each a slice of 40 000 floats in whole fragments
    # of 362 (a 1500-byte MTU) for each of the two ranks
    sides = [4 * 2 * 111 * 362] * 2 * side_jobs
    assert [body["model_bytes"] for body in stub.posted] == [CAPACITY_BYTES] + sides
    assert [(body.get("gather"), body.get("scatter")) for body in stub.posted] \
        == [(None, None)] + [(True, None), (None, True)] * side_jobs
    # both take turns with the all-reduce job (job 1): one booking for all three
    assert [body.get("turns_with") for body in stub.posted] == [None] + [1, 1] * side_jobs
    assert stub.posted[-1].get("aggregation") is (False if side_jobs else None)
    assert sorted(stub.deleted) == [1, 2, 3][:1 + 2 * side_jobs] and stub.jobs == {}


@pytest.mark.parametrize("kind", ["gather", "scatter"])
def test_a_refused_gather_or_scatter_job_leaves_its_calls_in_the_all_reduce_jobs_rounds(kind):
    stub = StubController(**{"refuse_" + kind: 409})
    try:
        answers = compared(stub, "--gather-job", "--scatter-job")
    finally:
        stub.close()
    other = {"gather": "scatter", "scatter": "gather"}[kind]
    for answer in answers:
        assert answer["gloo_only"] is None
        assert answer["counts"]["fabric"] == OVER_FABRIC + len(COLLECTIVES)
        assert "the controller made no job for 2 ranks" in answer[kind + "_refused"]
        assert answer[other + "_refused"] is None
    assert [body.get(kind) for body in stub.posted].count(True) == 1   # asked once
    assert len(stub.posted) == 3 and sorted(stub.deleted) == [1, 2 + (kind == "gather")]
    assert stub.jobs == {}


@pytest.mark.parametrize("stub", [409], indirect=True)
def test_a_refused_job_leaves_every_rank_on_gloo(stub):
    answers = compared(stub)
    for answer in answers:
        assert answer["counts"]["fabric"] == 0
        assert "the controller made no job for 2 ranks" in answer["gloo_only"]
    assert len(stub.posted) == 1 and stub.jobs == {}


def test_with_no_controller_every_rank_stays_on_gloo(stub):
    answers = compared(stub, controller="")
    for answer in answers:
        assert answer["counts"]["fabric"] == 0
        assert answer["gloo_only"].startswith("no controller: set SYNCFABRIC_CONTROLLER")
    assert stub.posted == []


def test_a_round_that_fails_raises_and_every_later_call_at_once(stub):
    """Rank 1's host is lost under the job: rank 0's next all-reduce fails after
    ROUND_FAIL_S naming it (not a hang, not a crash), the one after at once."""
    answers = ranks(stub, "--lose-a-host", "calls")
    lost = answers[0]
    assert "round 2 of job 1 failed: nothing came back" in lost["first"]
    assert "w2" in lost["first"]
    assert lost["next"].startswith("process group over the fabric failed before: round 2")
    assert stub.deleted == [1]   # rank 0 released the job at destroy_process_group


def test_ddp_with_no_hook_trains_over_the_backend_as_it_does_over_gloo(stub):
    """Every bucket is an all-reduce the fabric carries: every rank identical at every
    step, within float32's roundings of Gloo's ring (tests/unit/test_torch_hook.py)."""
    gloo = run_ranks(3, ["--mode", "gloo"])
    ours = run_ranks(3, ["--mode", "backend", "--controller", stub.url, "--hosts", "w1,w2,w3"])
    assert_identical_at_every_step(ours)
    assert all(answer["counts"]["fabric"] >= 5 and answer["gloo_only"] is None
               for answer in ours)
    mine, theirs = np.array(ours[0]["parameters"]), np.array(gloo[0]["parameters"])
    assert np.abs(mine - theirs).max() <= 1e-6 * (1 + np.abs(theirs).max())
    assert stub.deleted == [1] and stub.jobs == {}


def test_fsdp2_over_the_backend_ends_bit_for_bit_as_over_gloo(stub):
    """fully_shard's all-gathers and reduce-scatters (functional collectives: their
    coalesced forms, which over Gloo's default path held the GIL and hung) go through
    the fabric, and 20 steps end with Gloo's parameters, bit for bit."""
    answers = ranks(stub, "--fsdp", "fsdp", "--min-bytes", "0", "--capacity-bytes", "262144")
    for answer in answers:
        assert answer["fsdp_alike"] is True
        assert answer["counts"]["fabric"] >= 20 * 6   # each step's all-gathers alone
    # the first all-gather makes the group's job; the next, its gather job, and the first
    # reduce-scatter its scatter job, both taking turns with it
    assert [(body.get("gather"), body.get("scatter"), body.get("turns_with"))
            for body in stub.posted] == [(None, None, None), (True, None, 1), (None, True, 1)]
    assert stub.jobs == {}


def test_hsdp_over_the_backend_ends_bit_for_bit_as_over_gloo(stub):
    """HSDP on 4 ranks (2 replicas of 2 shards): each of the mesh's groups is a "fabric"
    group with a job of its own, and 20 steps end with Gloo's parameters, bit for bit."""
    answers = run_ranks(4, ["--controller", stub.url, "--hosts", "w1,w2,w3,w4", "--fsdp",
                            "hsdp", "--min-bytes", "0", "--capacity-bytes", "262144"],
                        module="tests.harness.backend_ranks")
    for answer in answers:
        assert answer["error"] is None, answer.get("traceback")
        assert answer["fsdp_alike"] is True
    # the two shard groups' jobs and the two replica groups', and each shard group's
    # gather job (its all-gathers) and scatter job (its reduce-scatters), taking turns
    # with that group's job
    kinds = [("gather" if body.get("gather") else "scatter" if body.get("scatter") else "job")
             for body in stub.posted]
    assert sorted(kinds) == ["gather"] * 2 + ["job"] * 4 + ["scatter"] * 2
    assert all(body["turns_with"] for body in stub.posted if body.get("gather")
               or body.get("scatter"))
    assert stub.jobs == {}


def test_a_round_that_fails_under_ddp_ends_the_run_with_its_error_not_a_crash(stub):
    """DDP with no hook died of SIGSEGV on a Future that ended in an error: the bucket
    whose round failed goes on unsummed, and the group's next all-reduce (in that step
    or the next) raises the error naming the lost host."""
    answers = ranks(stub, "--lose-a-host", "ddp", "--min-bytes", "1024",
                    "--capacity-bytes", "65536")   # every bucket through the fabric
    lost = answers[0]
    assert lost["raised_at"] >= 3   # rank 1 left before step 3
    assert lost["raised"].startswith("process group over the fabric failed before: round")
    assert "w2" in lost["raised"]


def test_what_goes_through_the_fabric_is_decided_from_the_arguments_alone():
    small, big = torch.zeros(10), torch.zeros(1000)
    sum_, avg = dist.ReduceOp.SUM, dist.ReduceOp.AVG

    def allreduce(tensors, op=sum_, coalesced=False):
        call = allreduce_call(tensors, op, 2, 4000, coalesced)
        return None if call is None else len(call.values)
    assert allreduce([big]) == 1000 and allreduce([big], avg) == 1000
    assert allreduce([big.to(torch.bfloat16)]) == 1000
    assert allreduce([big, big], coalesced=True) == 2000      # coalesced: end to end
    assert allreduce([big, big]) is None                       # else Gloo's: each all
    assert allreduce([big, big.half()], coalesced=True) is None   # but of one dtype
    assert allreduce([small]) is None                          # below min_bytes
    assert allreduce([big.double()]) is None                   # not on the wire
    assert allreduce([big], dist.ReduceOp.MAX) is None
    assert allreduce([big], dist._make_nccl_premul_sum(2.0)) == 1000
    assert allreduce([torch.zeros(100, 20).t()]) is None       # strided
    assert allreduce([big.to_sparse()]) is None
    assert broadcast_call([big], 0, 1, 4000).values.tobytes() == np.full(
        1000, -0.0, np.float32).tobytes()                      # a non-root gives -0.0
    assert broadcast_call([small], 0, 1, 4000) is None
    outputs = [torch.zeros(500), torch.zeros(500)]
    assert len(allgather_call(outputs, torch.ones(500), 1, 2, 4000).values) == 1000
    assert allgather_call(outputs, torch.ones(400), 1, 2, 4000) is None   # sizes differ
    assert allgather_call([torch.zeros(1000)], torch.ones(500), 0, 2, 4000).values[0] == 1
    assert reduce_scatter_call(torch.zeros(500), [big], sum_, 0, 2, 4000) is not None
    assert reduce_scatter_call(torch.zeros(400), [big], sum_, 0, 2, 4000) is None
    assert reduce_scatter_call(torch.zeros(500), [big], dist.ReduceOp.MIN, 0, 2, 4000) is None


def test_pg_options_of_another_kind_are_refused():
    with pytest.raises(TypeError, match="pg_options are a syncfabric.torch.FabricOptions"):
        create_group(None, {"controller": "http://x"})
    assert FabricOptions().capacity_bytes is None   # the first eligible call's
