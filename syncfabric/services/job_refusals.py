"""Why a job is refused (no Ryu): for lack of capacity, the link or aggregator on its way
with least left, and the jobs that hold it.

"On its way" is where the job would go on an empty fabric: it is planned alone (off
the event loop, as every plan is), and of the links and aggregators that plan loads, the
one with least free now is named. A job whose workers' own links are free can so be
told that the spine links another job holds are what it lacks. If even planning alone
fails, the workers' own links are all there is to name.
"""

from syncfabric.decisions import round_bounds
from syncfabric.decisions.gradient_plan import PlacementError
from syncfabric.decisions.multicast_trees import InfeasibleTree, without_links
from syncfabric.errors import Conflict
from syncfabric.services.job_planning import planned_round
from syncfabric.services.job_shares import holders, resource_name


def refusal(error, book, request, jobs):
    """The error a job is refused with (jobs: the Jobs service). One for lack of capacity
    names in `bottleneck` the resource on the job's way with least left, in
    `max_rate_mbps` what is left there, and in `held_by` the jobs that load it."""
    if isinstance(error, PlacementError):
        error = Conflict("the job does not fit: %s" % error)
    if not isinstance(error, Conflict) or "bottleneck" in error.details:
        return error
    reserved = without_links(book.view, book.reserved_mbps, jobs.fabric.down_links)
    resource, free = tightest_on_the_way(book.view, request, reserved, jobs.metrics, jobs.offload)
    held_by = holders([j for j in jobs.jobs.values() if j.installed], jobs.trees, jobs.plans,
                      resource)
    name = resource_name(resource)
    return Conflict("%s (the tightest link or aggregator on its way is %s, %.3f Mbit/s free%s)"
                    % (error, name, free, ", held by job %s" % ", ".join(map(str, held_by))
                       if held_by else ""), bottleneck=name, max_rate_mbps=free,
                    held_by=held_by, **error.details)


def tightest_on_the_way(view, request, reserved, metrics, offload):
    """(resource, Mbit/s free) of the links and aggregators the job's plan alone loads,
    the one with least free; the workers' own tightest link if no plan fits even alone."""
    try:
        alone = planned_round(view, request, {}, metrics, offload)
    except (PlacementError, InfeasibleTree, ValueError):
        return round_bounds.bottleneck(view, request["workers"], reserved)
    loaded = set(alone.gradients.loads()) | {edge for tree in alone.trees for edge in tree.edges}

    def free(resource):
        if view.is_aggregator(resource):
            return view.aggregators[resource] - reserved.get(resource, 0.0)
        return round_bounds.free_mbps(view, resource, reserved)
    tightest = min(sorted(loaded, key=str), key=free)
    return tightest, free(tightest)
