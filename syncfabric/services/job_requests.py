"""What a POST /jobs body may ask (no Ryu): its fields checked and its defaults filled in,
and a lease renewal's. Each field is described in docs/jobs.md; a request in the papers'
terms names its PS (`shard_hosts`), how the sums come back (`returns`) and the policy
that plans the gradients (`gradient_policy`)."""

from syncfabric.decisions import ina_problem, inart_placement, round_planner
from syncfabric.decisions.model_shards import DEFAULT_MTU, MAX_MTU, MIN_MTU
from syncfabric.errors import InvalidRequest
from syncfabric.services.job_shares import DEFAULT_WEIGHT
from syncfabric.services.request_fields import (check_fields, check_hosts, distinct_names,
                                               positive_number)

REQUEST_FIELDS = {"workers", "model_bytes", "shards", "placement", "aggregation", "ttl_s", "mtu",
                  "weight", "min_rate_mbps", "returns", "shard_hosts", "gradient_policy",
                  "borrow", "gather", "scatter", "turns_with"}
MAX_WORKERS = 64   # a fragment names the workers it carries in a 64-bit mask
ONE_PS_POLICIES = ina_problem.POLICIES          # GRID and its baselines
SHARDED_POLICIES = inart_placement.POLICIES     # InArt and its baselines


def parse_job_request(body):
    """The request with its defaults filled in, or InvalidRequest."""
    check_fields(body, REQUEST_FIELDS, {"workers", "model_bytes"})
    request = dict({"shards": "auto", "placement": round_planner.AUTO, "aggregation": True,
                    "ttl_s": None, "mtu": DEFAULT_MTU, "weight": DEFAULT_WEIGHT,
                    "min_rate_mbps": None, "returns": round_planner.MULTICAST,
                    "shard_hosts": None, "gradient_policy": None, "borrow": True,
                    "gather": False, "scatter": False, "turns_with": None}, **body)
    if not distinct_names(request["workers"], minimum=2) or len(request["workers"]) > MAX_WORKERS:
        raise InvalidRequest("workers must be a list of 2 to %d distinct host names" % MAX_WORKERS)
    size = request["model_bytes"]
    if not positive_number(size) or not isinstance(size, int):
        raise InvalidRequest("model_bytes must be a positive whole number of bytes")
    shards = request["shards"]
    if shards != "auto" and not (isinstance(shards, int) and not isinstance(shards, bool)
                                 and 1 <= shards <= round_planner.MAX_PSS):
        raise InvalidRequest("shards must be \"auto\" or a number of PS shards from 1 to %d"
                             % round_planner.MAX_PSS)
    if request["placement"] not in round_planner.PLACEMENTS:
        raise InvalidRequest("placement must be one of %s" % ", ".join(round_planner.PLACEMENTS))
    if not isinstance(request["aggregation"], bool):
        raise InvalidRequest("aggregation must be true or false")
    if not isinstance(request["borrow"], bool):
        raise InvalidRequest("borrow must be true or false (false: the job sends only its "
                             "share, even where the fabric lets jobs borrow; default true)")
    if request["returns"] not in round_planner.RETURNS:
        raise InvalidRequest("returns must be %s: the sums go back on one tree per shard, or "
                             "one copy per worker" % " or ".join(round_planner.RETURNS))
    check_ttl(request["ttl_s"])
    turns_with = request.get("turns_with")
    if turns_with is not None and not (isinstance(turns_with, int)
                                       and not isinstance(turns_with, bool) and turns_with > 0):
        raise InvalidRequest("turns_with must be the id of a job whose rounds never run "
                             "while this one's do, or null (default)")
    if not positive_number(request["weight"]):
        raise InvalidRequest("weight must be a positive number (a job's share of what it "
                             "shares grows with it; default 1)")
    if request["min_rate_mbps"] is not None and not positive_number(request["min_rate_mbps"]):
        raise InvalidRequest("min_rate_mbps must be a positive number of Mbit/s or null (10% "
                             "of the workers' slowest link)")
    mtu = request["mtu"]
    if not (isinstance(mtu, int) and not isinstance(mtu, bool) and MIN_MTU <= mtu <= MAX_MTU):
        raise InvalidRequest("mtu must be the hosts' data-plane MTU, a whole number of bytes "
                             "from %d to %d" % (MIN_MTU, MAX_MTU))
    return scattering(gathering(checked_policy(named_shard_hosts(request)), body), body)


def gathering(request, body):
    """A gather job's request (docs/jobs.md, decisions/gather_plan.py): one shard in
    each worker, in the workers' order, and no gradients to aggregate, as it says once
    filled in; InvalidRequest if it asks otherwise."""
    if not isinstance(request["gather"], bool):
        raise InvalidRequest("gather must be true or false (true: each shard's sums are its "
                             "own worker's values, an all-gather; default false)")
    if not request["gather"]:
        return request
    workers = len(request["workers"])
    if request["shards"] not in ("auto", workers) or request["shard_hosts"] is not None \
            or request["placement"] not in (round_planner.AUTO, round_planner.COLOCATED):
        raise InvalidRequest("a gather job has one shard in each worker: leave shards, "
                             "shard_hosts and placement out")
    if body.get("aggregation") or request["gradient_policy"] is not None:
        raise InvalidRequest("a gather job has no gradients: leave aggregation and "
                             "gradient_policy out")
    return dict(request, shards=workers, placement=round_planner.COLOCATED, aggregation=False)


def scattering(request, body):
    """A scatter job's request (docs/jobs.md, decisions/scatter_plan.py): one shard in
    each worker, in the workers' order, its sums kept there, as it says once filled in;
    InvalidRequest if it asks otherwise. Its gradients may go through aggregators."""
    if not isinstance(request["scatter"], bool):
        raise InvalidRequest("scatter must be true or false (true: each shard's sums stay in "
                             "its own worker, a reduce-scatter; default false)")
    if not request["scatter"]:
        return request
    if request["gather"]:
        raise InvalidRequest("a job is a gather job or a scatter job, not both")
    workers = len(request["workers"])
    if request["shards"] not in ("auto", workers) or request["shard_hosts"] is not None \
            or request["placement"] not in (round_planner.AUTO, round_planner.COLOCATED):
        raise InvalidRequest("a scatter job has one shard in each worker: leave shards, "
                             "shard_hosts and placement out")
    if request["gradient_policy"] is not None or body.get("returns") is not None:
        raise InvalidRequest("a scatter job's gradients are the planner's and its sums do "
                             "not return: leave gradient_policy and returns out")
    return dict(request, shards=workers, placement=round_planner.COLOCATED)


def named_shard_hosts(request):
    """A request that names its shards' hosts: they are dedicated hosts, as many shards
    as hosts (the request says so once filled in); InvalidRequest if it asks otherwise."""
    hosts = request["shard_hosts"]
    if hosts is None:
        return request
    if not distinct_names(hosts) or len(hosts) > round_planner.MAX_PSS:
        raise InvalidRequest("shard_hosts must be null (the planner's choice) or a list of 1 "
                             "to %d distinct host names" % round_planner.MAX_PSS)
    if request["shards"] not in ("auto", len(hosts)):
        raise InvalidRequest("shards is %s but shard_hosts names %d host(s): leave shards out"
                             % (request["shards"], len(hosts)))
    if request["placement"] not in (round_planner.AUTO, round_planner.DEDICATED):
        raise InvalidRequest("shard_hosts are hosts of the shards' own: placement must be "
                             "%s or left out" % round_planner.DEDICATED)
    return dict(request, shards=len(hosts), placement=round_planner.DEDICATED)


def checked_policy(request):
    """A request that names how its gradients are planned (a paper's policy or a
    baseline's) says how many shards: one for GRID's and its baselines', any number for
    InArt's; InvalidRequest otherwise."""
    policy, shards = request["gradient_policy"], request["shards"]
    if policy is None:
        return request
    if policy not in ONE_PS_POLICIES + SHARDED_POLICIES:
        raise InvalidRequest("gradient_policy must be null (the planner's) or one of %s"
                             % ", ".join(ONE_PS_POLICIES + SHARDED_POLICIES))
    if shards == "auto":
        raise InvalidRequest("a gradient_policy plans for a number of shards: give shards "
                             "or shard_hosts")
    if shards > 1 and policy in ONE_PS_POLICIES:
        raise InvalidRequest("gradient_policy %s plans for one PS; for %d shards use one of %s"
                             % (policy, shards, ", ".join(SHARDED_POLICIES)))
    return request


def check_job_hosts(view, request):
    """InvalidRequest unless the request's workers, and the hosts it names for its
    shards, are the fabric's hosts in roles they can take: a shard's host neither a
    worker nor an aggregator."""
    hosts = request["shard_hosts"] or []
    check_hosts(view, request["workers"], pss=hosts, unknown_error=InvalidRequest)
    taken = [h for h in hosts if h in request["workers"] or view.is_aggregator(h)]
    if taken:
        raise InvalidRequest("shard_hosts must be hosts of their own, not workers or "
                             "aggregators: %s" % ", ".join(taken))


def check_ttl(ttl_s):
    if ttl_s is not None and not positive_number(ttl_s):
        raise InvalidRequest("ttl_s must be a positive number of seconds or null")


def lease_of(body):
    """A lease renewal's ttl_s, or InvalidRequest."""
    check_fields(body, {"ttl_s"}, {"ttl_s"})
    check_ttl(body["ttl_s"])
    return body["ttl_s"]
