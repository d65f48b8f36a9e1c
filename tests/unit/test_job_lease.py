"""A job's owner keeps its lease (hosts/job_lease.py) against a controller stand-in: a
renewal every third of the lease until the job is released, a controller away said once
and ridden out, a job gone (404) left alone, and no lease when none is asked for."""

import logging
import time

import pytest

from syncfabric.hosts.jobs.fabric_worker import FabricJob
from syncfabric.hosts.jobs.job_layout import JobError
from syncfabric.hosts.jobs.job_lease import LEASE_S
from tests.harness.loopback_jobs import StubController

TTL_S = 0.3


@pytest.fixture
def stub():
    controller = StubController()
    yield controller
    controller.close()


def created(stub, **options):
    return FabricJob.create(stub.url, ["w1", "w2"], 10_000, **options)


def test_the_owner_renews_every_third_of_the_lease_until_it_releases_the_job(stub):
    job = created(stub, ttl_s=TTL_S)
    # three renewals in 1.5 leases when idle; a loaded machine may take twice that
    assert wait_for(lambda: len(stub.renewed) >= 3, within_s=2 * TTL_S)
    assert stub.renewed[:3] == [(job.id, TTL_S)] * 3
    keeper = job.lease
    job.release()
    assert not keeper.thread.is_alive() and stub.deleted == [job.id]


def test_a_controller_away_is_said_once_and_the_lease_kept_once_it_is_back(stub, caplog):
    caplog.set_level(logging.INFO, "syncfabric.hosts")
    with created(stub, ttl_s=TTL_S):
        stub.away = True
        assert wait_for(lambda: "lease not renewed" in caplog.text)
        stub.renewed.clear()   # one may have landed before the controller went away
        time.sleep(TTL_S * 1.2)   # further renewals fail meanwhile, and are not said again
        assert stub.renewed == [], stub.renewed
        assert caplog.text.count("lease not renewed") == 1, caplog.text
        stub.away = False
        # the stand-in records the renewal before the keeper, answered, says so
        assert wait_for(lambda: stub.renewed and "lease renewed again" in caplog.text)


def wait_for(condition, within_s=10 * TTL_S):
    """Whether `condition()` held within `within_s`: however loaded the machine, a renewal
    every third of the lease comes within a few leases."""
    deadline = time.monotonic() + within_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return bool(condition())


def test_a_job_gone_is_not_renewed_again(stub, caplog):
    job = created(stub, ttl_s=TTL_S)
    stub.jobs.clear()   # released by the controller meanwhile (its lease ran out)
    job.lease.thread.join(timeout=10 * TTL_S)
    assert not job.lease.thread.is_alive() and "is gone" in caplog.text


def test_a_job_gets_a_lease_unless_asked_for_none(stub):
    leased, unleased = created(stub), created(stub, ttl_s=None)
    assert [body["ttl_s"] for body in stub.posted] == [LEASE_S, None]
    assert leased.lease is not None and unleased.lease is None
    assert FabricJob.attach(stub.url, leased.id).lease is None   # only the owner keeps it
    leased.release()
    unleased.release()


def test_a_job_is_attached_to_by_its_id_as_a_number_or_as_text(stub):
    job = created(stub, ttl_s=None)
    assert FabricJob.attach(stub.url, str(job.id)).id == FabricJob.attach(stub.url, job.id).id == job.id
    with pytest.raises(JobError, match="a job's id is a whole number .* not 'three'"):
        FabricJob.attach(stub.url, "three")
    job.release()
