"""How the fabric's jobs share it (no Ryu): each job's rate, and the rate weighted max-min
fairness would give it among the jobs installed now (decisions/fair_shares.py), with the
link or aggregator that bounds that share.

A job's rate is its workers' gradient rate (its INA plan's theta); its return trees'
rates are taken to grow and shrink with it, so its loads per Mbit/s are its trees' and
plan's loads over that rate. Its ceiling is its workers' slowest link: no round of it
runs faster (rate_ceiling_mbps). Each job reports `rate_mbps`, `weight`,
`min_rate_mbps`, `fair_share_mbps` and `bound_by` (a directed link "a->b", an
aggregator, or "ceiling").
"""

from syncfabric.decisions.fair_shares import CEILING, Demand, fair_rates
from syncfabric.decisions.round_bounds import line_rate_mbps
from syncfabric.decisions.reservations import ReservationError, with_trees

DEFAULT_WEIGHT = 1.0
TURNS_WITH = "turns_with"   # a request's field: the job it takes turns with (turn_taking.py)
DEFAULT_MIN_SHARE = 0.1   # of the workers' slowest link, when a job names no min_rate_mbps


def min_rate_mbps(view, request):
    """The rate below which the job would rather not run: its own, or 10% of its line rate."""
    asked = request.get("min_rate_mbps")
    return asked if asked is not None else DEFAULT_MIN_SHARE * line_rate_mbps(view, request["workers"])


def rate_ceiling_mbps(view, request):
    """The highest rate a job may have: its workers' slowest link, since a worker sends
    the whole model at the job's rate; a gather job's N/(N-1) of it, since there a
    worker takes in (N-1)/N of the model at that rate and sends its own 1/N, and a
    scatter job's too: a worker sends (N-1)/N of it, its own slice summed in its host."""
    line = line_rate_mbps(view, request["workers"])
    if not (request.get("gather") or request.get("scatter")):
        return line
    workers = len(request["workers"])
    return line * workers / (workers - 1)


def job_demand(job, trees, plans, view):
    """(rate, Demand) of an installed job, from its plan and trees as they are now; None
    if its plan is gone (it is being released), or if it takes turns with another job:
    it runs inside that one's booking and share (services/turn_taking.py)."""
    if job.request.get(TURNS_WITH) is not None:
        return None
    parts = live_parts(job, trees, plans)
    if parts is None or parts[0].f <= 0:
        return None
    gradients, job_trees = parts
    rate, loads = gradients.f, part_loads(gradients, job_trees)
    return rate, Demand(job.request.get("weight", DEFAULT_WEIGHT),
                        rate_ceiling_mbps(view, job.request),
                        {resource: load / rate for resource, load in loads.items()})


def live_parts(job, trees, plans):
    """(gradient plan, trees) an installed job holds now; None once a part is gone
    (lost around a fault: the job is being released)."""
    live = plans.plans.get(job.plan_id)
    if live is None:
        return None
    try:
        return live.result, [trees.book.get(tree_id).tree for tree_id in job.tree_ids]
    except ReservationError:
        return None


def job_loads(job, trees, plans):
    """{link or aggregator: Mbit/s} the job's plan and trees hold now ({} once a part is
    gone)."""
    parts = live_parts(job, trees, plans)
    return {} if parts is None else part_loads(*parts)


def part_loads(gradients, trees):
    """{link or aggregator: Mbit/s} a job's gradient plan and return trees put there."""
    return with_trees(gradients.loads(), trees)


def capacities(view):
    """{resource: Mbit/s}: every directed link and every aggregator of the fabric."""
    links = {(tail, head): data["capacity_mbps"] for tail, head, data in view.links()}
    return dict(links, **view.aggregators)


def reserved_beside(reserved, held):
    """`reserved` ({resource: Mbit/s}) less what other jobs hold (held: [{resource:
    Mbit/s}]), never below 0: the room a job is planned on where it may share their
    holdings (the jobs idle while its rounds run, or the partner it takes turns with)."""
    left = dict(reserved)
    for loads in held:
        for resource, load in loads.items():
            left[resource] = max(0.0, left.get(resource, 0.0) - load)
    return left


def sharing(jobs, trees, plans, view):
    """{job id: what its report says of how it shares the fabric} for the jobs installed."""
    demands, rates = {}, {}
    for job in jobs:
        found = job_demand(job, trees, plans, view)
        if found is not None:
            rates[job.id], demands[job.id] = found
    fair, bound_by = fair_rates(capacities(view), demands)
    return {job.id: {"rate_mbps": rates[job.id], "weight": demands[job.id].weight,
                     "min_rate_mbps": min_rate_mbps(view, job.request),
                     "fair_share_mbps": fair[job.id], "bound_by": resource_name(bound_by[job.id])}
            for job in jobs if job.id in demands}


def shares_of(jobs, job=None):
    """sharing() of the Jobs service's installed jobs, and of `job` (one being released is
    no longer listed); {} before the fabric is loaded."""
    if jobs.trees.book is None:
        return {}
    installed = [j for j in jobs.jobs.values() if j.installed and j is not job]
    return sharing(installed + ([job] if job else []), jobs.trees, jobs.plans,
                   jobs.trees.book.view)


def resource_name(resource):
    if resource == CEILING or isinstance(resource, str):
        return resource
    return "%s->%s" % resource


def holders(jobs, trees, plans, resource):
    """The ids of the installed `jobs` whose trees or plan load `resource` (a link or an
    aggregator): whom a job refused for lack of it waits for."""
    found = []
    for job in jobs:
        demand = job_demand(job, trees, plans, trees.book.view)
        if demand is not None and demand[1].per_mbps.get(resource, 0.0) > 0:
            found.append(job.id)
    return sorted(found)
