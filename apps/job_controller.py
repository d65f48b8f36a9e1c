"""Jobs app: routes REST calls, fabric events and its timer to the jobs service
(syncfabric/services/jobs.py): a streaming round's shards, return trees and gradient
plan as one resource.

    ryu-manager apps.job_controller       # loads the fabric, multicast and INA apps too

REST: POST /jobs, GET /jobs (with an ETag: 304 to If-None-Match while no job changed),
GET/DELETE /jobs/<id> (GET with ?worker=&round=&back=&comm_s=&compute_s=&borrowed_mbps=:
a worker says where it is, which of its rounds are back, how long its rounds and
compute take and what it borrows, and an ETag), PUT /jobs/<id>/lease (its owner renews
the lease), GET/PUT /fabric/policy (how jobs share the fabric: services/tenants.py).
Errors: 400 malformed, invalid or an unknown host, 403 not the job's owner, 404 unknown
job, 409 the job does not fit (with its bottleneck and max_rate_mbps), 503 fabric not
ready or saved jobs being restored, 500 a switch rejected a part.
"""

import time

from ryu.app.wsgi import Response
from ryu.base import app_manager
from ryu.controller import event
from ryu.controller.handler import set_ev_cls

from apps.fabric_controller import EventFabricChanged
from apps.rest_json import (METRICS_KEY, answer, check_release_key, counted_route,
                            read_json_body, resource_api)
from apps.services import CONTEXT_KEY, contexts, start_timers
from syncfabric.errors import ServiceError

FOLLOW_INTERVAL_S = 0.5
REST_APP_KEY = "jobs"


class JobRestApi(resource_api("jobs", None, REST_APP_KEY)):
    """The jobs' collection, and PUT /jobs/<id>/lease."""

    @counted_route("jobs", "/jobs", methods=["GET"])
    def list_all(self, req, **_kwargs):
        """GET /jobs with a weak ETag (services.jobs.listing_tag); sent back in
        If-None-Match, 304 without a body while it holds. Every aggregator daemon polls
        this twice a second, and a 16-shard job's report is 32 KB to make and to parse;
        with ?host= it says it is alive (services/job_daemons.py)."""
        host = req.GET.get("host")   # an aggregator daemon names its host as it polls
        if host:
            self.service.daemons.heard_from(host, time.monotonic())
        etag = self.service.list_tag()
        if req.headers.get("If-None-Match") == etag:
            response = Response(status=304)
        else:
            response = answer(req, lambda: (self.service.list(time.monotonic()), 200))
        if response.status_int in (200, 304):   # an error names no version of the list
            # not stored: expires_in_s counts down under the same tag
            response.headers.update({"ETag": etag, "Cache-Control": "no-store"})
        return response

    @counted_route("jobs", "/jobs/{item_id}", methods=["GET"])
    def show(self, req, item_id, **_kwargs):
        """GET /jobs/<id>: with ?worker=h1&round=N, a worker of the job says which round
        it began (so the controller knows from which round new rates can hold), with
        back the round all its rounds are back through (a shrink need not wait for a
        worker that computes), with comm_s and compute_s its iteration (for
        interleaving), with borrowed_mbps what it borrows; with the job's weak ETag in
        If-None-Match, 304 while its generation, lease and window hold. Each worker reads
        its job twice a second."""
        now = time.monotonic()
        try:
            etag = self.service.heard(item_id, req.GET.get("worker"), req.GET.get("round"), now,
                                      req.GET)
        except ServiceError:   # answered below, as show() says it
            etag = None
        if etag is not None and req.headers.get("If-None-Match") == etag:
            response = Response(status=304)
        else:
            response = answer(req, lambda: (self.service.show(item_id, now), 200))
        if etag is not None and response.status_int in (200, 304):
            response.headers.update({"ETag": etag, "Cache-Control": "no-store"})
        return response

    @counted_route("jobs", "/fabric/policy", methods=["GET"])
    def policy(self, req, **_kwargs):
        """GET /fabric/policy: how jobs share the fabric, and the policies there are."""
        return answer(req, lambda: (self.service.tenants.show(), 200))

    @counted_route("jobs", "/fabric/policy", methods=["PUT"])
    def set_policy(self, req, **_kwargs):
        """PUT /fabric/policy {"policy": "first-come" | "fair" | "weighted"}: live jobs
        move to the shares it gives them."""
        return answer(req, lambda: (self.service.tenants.set_policy(read_json_body(req),
                                                                    time.monotonic()), 200))

    @counted_route("jobs", "/jobs/{item_id}/lease", methods=["PUT"])
    def renew(self, req, item_id, **_kwargs):
        def renew():
            check_release_key(req, self.service.owner_key(item_id), "job %s" % item_id)
            return self.service.renew(item_id, read_json_body(req), time.monotonic()), 200
        return answer(req, renew)


# the parts' own apps move them around faults; ryu reads the list from the module
_REQUIRED_APP = ["apps.multicast_controller", "apps.ina_controller"]


class EventFollowJobs(event.EventBase):
    """Timer: leases, parts lost and parts moved."""


class JobController(app_manager.RyuApp):
    _CONTEXTS = contexts()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        services = kwargs[CONTEXT_KEY]
        self.jobs = services.jobs
        kwargs["wsgi"].register(JobRestApi, {REST_APP_KEY: self.jobs, METRICS_KEY: services.metrics})

    def start(self):
        super().start()
        start_timers(self, {EventFollowJobs: FOLLOW_INTERVAL_S})

    @set_ev_cls(EventFollowJobs)
    def _follow(self, _ev):
        self.jobs.follow(time.monotonic())

    @set_ev_cls(EventFabricChanged)
    def _fabric_changed(self, ev):
        self.jobs.fabric_changed(ev.restored, time.monotonic())


if __name__ not in ("apps.job_controller", "__main__"):   # ryu-manager apps/job_controller.py
    from apps.launch_by_path import stand_in
    stand_in(globals())
