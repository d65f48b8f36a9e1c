"""Where a job's request becomes the round planner's plan (no Ryu): on what the book
leaves free when it is admitted (services/jobs.py), and alone on an empty fabric when
a refusal looks for what is on its way (services/job_refusals.py). Planning takes
seconds on large fabrics, so it runs off the event loop."""

from syncfabric.decisions import round_planner
from syncfabric.decisions.gather_plan import plan_gather
from syncfabric.decisions.scatter_plan import plan_scatter
from syncfabric.services.job_reports import gradient_mbit, returns_of


def planned_round(view, request, reserved_mbps, metrics, offload):
    """The round planner's plan of `request` on what reserved_mbps leaves free (a gather
    job's: its return trees alone, gather_plan; a scatter job's: its gradients alone,
    scatter_plan)."""
    with metrics.planning_seconds.labels("job").time():
        if request.get("gather"):
            return offload(plan_gather, view, request["workers"], gradient_mbit(request),
                           reserved_mbps, returns_of(request))
        if request.get("scatter"):
            return offload(plan_scatter, view, request["workers"], gradient_mbit(request),
                           request["aggregation"], reserved_mbps)
        return offload(round_planner.plan_job, view, request["workers"],
                       gradient_mbit(request), request["placement"], requested_shards(request),
                       request["aggregation"], reserved_mbps, returns_of(request),
                       request.get("shard_hosts"), request.get("gradient_policy"))


def beats_every_plain_round(view, request, reserved_mbps, planned):
    """Whether `planned` (a RoundPlan) is as short as any round of `request` without
    aggregators could be on what reserved_mbps leaves free (their lower bound): then
    planning one to compare with it is wasted."""
    plain_bound_s = round_planner.bound_without_aggregators_s(
        view, request["workers"], gradient_mbit(request), request["placement"],
        requested_shards(request), reserved_mbps, request.get("shard_hosts"))
    return round_planner.reaches(planned, plain_bound_s)


def requested_shards(request):
    """The shard count asked for, or None for the planner's choice ("auto")."""
    return None if request["shards"] == "auto" else request["shards"]
