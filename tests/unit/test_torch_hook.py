"""fabric_hook on loopback with no fabric (tests/harness/loopback_jobs.py): DDP ranks as
processes, a controller stand-in making jobs whose shards are in the workers. The hook
matches Gloo within float32's summation bound, keeps every rank bit-identical through
DDP's bucket rebuild and several buckets in flight, refuses what cannot go through the
fabric on every rank alike (leaving no job), and falls back when asked."""

import numpy as np
import pytest

from syncfabric.hosts.jobs.job_lease import LEASE_S
from syncfabric.torch import registration
from syncfabric.torch.registration import FabricHookError, hosts_problem, where_gradients_are
from tests.harness.loopback_jobs import (StubController, address, assert_identical_at_every_step,
                                         run_ranks)

WORKERS = ["w1", "w2", "w3"]


@pytest.fixture
def stub():
    controller = StubController(topology=[{"name": "w1", "ip": "127.0.0.1"}])
    yield controller
    controller.close()


def fabric(stub, *extra, hosts=WORKERS):
    return ["--controller", stub.url, "--hosts", ",".join(hosts), *extra]


def final_parameters(answers):
    return np.array(answers[0]["parameters"])


def thread_kind(name):
    """A thread's name less the worker's host: syncfabric-worker, syncfabric-buckets, ..."""
    return "syncfabric-worker" if name.startswith("syncfabric-worker-") else name


def test_the_hook_trains_as_gloo_does_and_every_rank_is_identical_at_every_step(stub):
    gloo = run_ranks(3, ["--mode", "gloo"])
    hooked = run_ranks(3, fabric(stub))
    assert_identical_at_every_step(hooked)
    assert all(answer["registered"] and answer["fallbacks"] == 0 for answer in hooked)
    # the step's last bucket completed by the worker's I/O thread as its sum came back,
    # the others by the settler (MainThread: done before the harness watched it)
    settled_by = {(b["last"], thread_kind(b["settled_by"])) for a in hooked for b in a["buckets"]}
    assert (True, "syncfabric-worker") in settled_by and (False, "syncfabric-buckets") in settled_by
    assert (True, "syncfabric-buckets") not in settled_by
    assert (False, "syncfabric-worker") not in settled_by
    ours, theirs = final_parameters(hooked), final_parameters(gloo)
    # float32 sums in another order than Gloo's ring: 5 SGD steps apart by roundings only
    assert np.abs(ours - theirs).max() <= 1e-6 * (1 + np.abs(theirs).max())
    assert stub.deleted == [1] and stub.jobs == {}   # released at destroy_process_group
    assert stub.posted[0]["ttl_s"] == LEASE_S   # kept by rank 0 meanwhile
    # registration took a round of zeros (first_round) before the first step's
    assert all(answer["first_step_round"] == 2 and 1 in answer["rounds_filed"]
               for answer in hooked)


def test_buckets_rebuilt_after_the_first_step_and_several_in_flight(stub):
    answers = run_ranks(2, fabric(stub, hosts=WORKERS[:2]))
    assert_identical_at_every_step(answers)
    buckets = answers[0]["buckets"]
    first_step = [b["floats"] for b in buckets if b["index"] == 0][:1]
    assert first_step == [stub.posted[0]["model_bytes"] // 4]   # one bucket, then rebuilt
    later = buckets[1:]
    assert len(later) == 8 and {b["floats"] for b in later} == {4810, 1088}
    assert max(b["in_flight"] for b in later) >= 1   # the next bucket came before a sum


def test_a_model_of_another_dtype_is_refused_on_every_rank_and_makes_no_job(stub):
    answers = run_ranks(2, fabric(stub, "--dtype", "float64", hosts=WORKERS[:2]))
    assert all("float64" in a["error"] and "fallback=True" in a["error"] for a in answers)
    assert stub.posted == []


def test_a_refused_job_is_every_ranks_error(stub):
    stub.refuse = 409
    answers = run_ranks(2, fabric(stub, hosts=WORKERS[:2]))
    assert all("HTTP 409" in a["error"] and "links lack room" in a["error"] for a in answers)
    assert stub.jobs == {}


def test_a_controller_that_does_not_answer_is_every_ranks_error():
    answers = run_ranks(2, ["--controller", "http://127.0.0.1:9", "--hosts", "w1,w2"])
    assert all("no job" in a["error"] and "Connection refused" in a["error"] for a in answers)


def test_ranks_that_share_a_host_are_refused(stub):
    """GLOO_SOCKET_IFNAME=lo: both ranks are 127.0.0.1, the stand-in's w1."""
    answers = run_ranks(2, ["--controller", stub.url])
    assert all("ranks 0 and 1 are both on host w1" in a["error"] for a in answers)
    assert stub.posted == []


def test_a_rank_whose_address_the_fabric_lacks_is_named(stub):
    stub.topology = [{"name": "h1", "ip": "10.0.0.1"}]
    answers = run_ranks(2, ["--controller", stub.url])
    assert all("rank 0: no host of the controller's fabric has lo's address 127.0.0.1" in a["error"]
               and "rank 1:" in a["error"] for a in answers)
    assert stub.posted == []


def test_a_rank_that_cannot_open_its_worker_fails_every_rank_and_the_job_is_released(stub):
    stub.addresses = {"w2": "192.0.2.1"}   # not this machine's: w2 cannot bind it
    answers = run_ranks(2, fabric(stub, hosts=WORKERS[:2]))
    assert all("job 1 cannot run on these hosts: rank 1 (w2)" in a["error"] for a in answers)
    assert stub.deleted == [1] and stub.jobs == {}


class Wrapped:
    """What the checks read of a DistributedDataParallel model: .module."""

    def __init__(self, module):
        self.module = module


def test_a_model_off_the_cpu_or_a_group_not_gloos_is_refused_at_registration(monkeypatch):
    """Before any job, with what to do next; not a TypeError in the first backward."""
    import torch
    monkeypatch.setattr(registration.dist, "get_backend", lambda group: group)
    cpu, meta = Wrapped(torch.nn.Linear(4, 2)), Wrapped(torch.nn.Linear(4, 2, device="meta"))
    where_gradients_are(cpu, "gloo")
    with pytest.raises(FabricHookError, match="backend is nccl: .*Gloo group.*fallback=True"):
        where_gradients_are(cpu, "nccl")
    with pytest.raises(FabricHookError, match="parameters are on meta: .*host memory.*fallback=True"):
        where_gradients_are(meta, "gloo")
    from syncfabric.torch.hook import fabric_hook   # which checks first, asking nobody
    with pytest.raises(FabricHookError, match="backend is nccl"):
        fabric_hook(cpu, "http://127.0.0.1:9", process_group="nccl")
    assert fabric_hook(meta, "http://127.0.0.1:9", fallback=True, process_group="gloo") is None


def test_more_ranks_than_the_wire_format_carries():
    assert "at most 64 workers" in hosts_problem(["h%d" % i for i in range(65)], 65)
    assert hosts_problem(["h1", "h2"], 2) is None


def test_with_fallback_what_cannot_go_through_the_fabric_goes_over_the_process_group(stub):
    gloo = run_ranks(2, ["--mode", "gloo", "--dtype", "mixed"])
    answers = run_ranks(2, fabric(stub, "--dtype", "mixed", "--fallback", hosts=WORKERS[:2]))
    assert_identical_at_every_step(answers)
    assert answers[0]["fallbacks"] == 5   # the float64 head's bucket, every step
    settled_by = {b["floats"]: b["settled_by"] for b in answers[0]["buckets"]}
    assert settled_by[64 * 10 + 10] == "syncfabric-buckets"   # over Gloo, in bucket order
    assert stub.posted[0]["model_bytes"] == 4 * (16 * 64 + 64 + 64 * 64 + 64)   # the rest
    assert np.allclose(final_parameters(answers), final_parameters(gloo), rtol=0, atol=1e-6)
    down = run_ranks(2, ["--controller", "http://127.0.0.1:9", "--hosts", "w1,w2", "--fallback"])
    assert all(a["error"] is None and a["registered"] is False for a in down)


def test_a_sum_that_is_not_finite_fails_every_rank_or_falls_back(stub):
    failed = run_ranks(2, fabric(stub, "--nan-step", "3", "--nan-rank", "1", hosts=WORKERS[:2]))
    assert all("not finite" in a["error"] for a in failed)
    assert all(len(a["hashes"]) == 2 for a in failed)
    fell_back = run_ranks(2, fabric(stub, "--nan-step", "3", "--nan-rank", "1", "--fallback",
                                    hosts=WORKERS[:2]))
    # both buckets of step 3, and of steps 4 and 5: the parameters are NaN from then on
    assert all(a["error"] is None and a["fallbacks"] == 6 for a in fell_back)
    assert all(len(set(hashes)) == 1 for hashes in fell_back[0]["hashes"])
    assert stub.jobs == {}


def test_bfloat16_goes_as_float32_and_comes_back_identical(stub):
    answers = run_ranks(2, fabric(stub, "--dtype", "bfloat16", hosts=WORKERS[:2]))
    assert_identical_at_every_step(answers)
    assert answers[0]["fallbacks"] == 0 and np.isfinite(final_parameters(answers)).all()


def test_loopback_addresses_are_distinct():
    assert len({address(i) for i in range(3)}) == 3


def test_the_first_round_may_take_as_long_as_the_controller_predicts_and_fails_named():
    """Registration's round of zeros is given the round the controller predicts and as
    long as a round may stall: a 25 MB round of 16 ranks predicted at 13.3 s went to
    Gloo at a flat 8 s, every rank saying nothing. One that does not come back says
    so, and every rank's problem names something even where an error says nothing."""
    from types import SimpleNamespace

    from syncfabric.hosts.jobs.job_layout import JobError
    from syncfabric.hosts.jobs.round_stalls import ROUND_FAIL_ROUNDS
    from syncfabric.torch.registration import (FIRST_ROUND_S, first_round, first_round_s,
                                               on_every_rank)
    long_round = SimpleNamespace(predicted_round_s=13.287, floats=6553600)
    assert first_round_s(long_round) == pytest.approx(13.287 * (1 + ROUND_FAIL_ROUNDS))
    assert first_round_s(SimpleNamespace(predicted_round_s=0.01)) == FIRST_ROUND_S
    assert first_round_s(SimpleNamespace(predicted_round_s=None)) == FIRST_ROUND_S
    asked = {}

    def never_back(values, timeout):
        asked["timeout"] = timeout
        raise TimeoutError()
    worker = SimpleNamespace(layout=long_round, allreduce=never_back)
    with pytest.raises(JobError, match=r"first round \(zeros, 26.2 MB, predicted to take "
                                       r"13.3 s\) did not come back in 39.9 s"):
        first_round(worker)
    assert asked["timeout"] == first_round_s(long_round)
    released = []
    job = SimpleNamespace(id=7, release=lambda: released.append(7))
    alone = SimpleNamespace(rank=0, gathered=lambda value: [value])
    with pytest.raises(FabricHookError, match=r"rank 0 \(h1\): TimeoutError"):
        on_every_rank(lambda: never_back(None, 1.0), None, job, "h1", alone)
    assert released == [7]
