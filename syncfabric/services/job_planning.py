"""Where a job's request becomes the round planner's plan (no Ryu): on what the book
leaves free when it is admitted (services/jobs.py), and alone on an empty fabric when
a refusal looks for what is on its way (services/job_refusals.py). Planning takes
seconds on large fabrics, so it runs off the event loop."""

from syncfabric.decisions import round_planner
from syncfabric.services.job_reports import gradient_mbit


def planned_round(view, request, reserved_mbps, metrics, offload):
    """The round planner's plan of `request` on what reserved_mbps leaves free."""
    shards = None if request["shards"] == "auto" else request["shards"]
    with metrics.planning_seconds.labels("job").time():
        return offload(round_planner.plan_job, view, request["workers"],
                       gradient_mbit(request), request["placement"], shards,
                       request["aggregation"], reserved_mbps)
