"""What a job's hosts are told (GET /jobs/<id>): its shards and their return trees,
each worker's destinations, each aggregator's part, its lease and the predicted round
against the lower bound, from the job's INA plan and trees as their services report
them."""

from syncfabric.decisions import round_planner
from syncfabric.decisions.model_shards import (DEFAULT_MTU, destinations, even_fragment_bytes,
                                               fragment_count, fragment_ranges, wire_mbit)
from syncfabric.errors import NotFound


def fragment_bytes(request, shards=1):
    """The payload of the job's fragments: datagrams that fill its hosts' MTU (1500 for a
    job saved before jobs had one), or a little less, so that its `shards` hold as many
    fragments each (model_shards.even_fragment_bytes)."""
    return even_fragment_bytes(request["model_bytes"], shards, request.get("mtu", DEFAULT_MTU))


def gradient_mbit(request, shards=1):
    return wire_mbit(request["model_bytes"], fragment_bytes(request, shards))


def returns_of(request):
    """How the request's shards return their sums (a job saved before it could say:
    multicast)."""
    return request.get("returns", round_planner.MULTICAST)


def job_report(job, trees, plans, now):
    """What the job's hosts need: the shards (host, bytes, fragments, port, return
    tree), each worker's destinations per shard, each aggregator's part, and the
    predicted round time against the lower bound; NotFound if it lost a part."""
    try:
        parts = [trees.show(i, now) for i in job.tree_ids]
        plan = plans.show(job.plan_id, now)
    except NotFound:
        raise NotFound("job %d lost a part (nothing fit around a fault) and is being "
                       "released; ask for a new one" % job.id) from None
    placement = placement_of(trees.book.view, list(plan["ports"]), job.request["workers"])
    if job.expires_at is None:
        expires_in_s = None
    else:
        expires_in_s = max(0.0, job.expires_at - now)
    return dict(round_report(job.request, plan, parts, placement),
                id=job.id,
                generation=job.generation,
                effective_round=job.effective_round,
                plan=job.plan_id,
                lower_bound_s=job.round.bound_s,
                ring_round_s=job.round.ring_s,
                ttl_s=job.request["ttl_s"],
                expires_in_s=expires_in_s)


def placement_of(view, pss, workers):
    """Where a job's shards are: every one on an aggregator, in the workers, or not."""
    if all(view.is_aggregator(ps) for ps in pss):
        return round_planner.IN_NETWORK
    return round_planner.COLOCATED if set(pss) <= set(workers) else round_planner.DEDICATED


def round_report(request, plan, trees, placement):
    """The job's shards, destinations and aggregators from its INA plan's report and its
    return trees' (each shard's by their source), its shards placed as `placement` says."""
    model_bytes, pss = request["model_bytes"], list(plan["ports"])
    size = fragment_bytes(request, len(pss))
    held = fragment_ranges(plan["split"], fragment_count(model_bytes, size))
    address, port = plan["addresses"], plan["ports"]
    legs = destinations(plan["workers"], request["workers"], pss, held)
    shards = [shard_report(ps, [tree for tree in trees if tree["source"] == ps], held[ps], size,
                           model_bytes, address, port, plan["theta_mbps"] * plan["split"][ps])
              for ps in pss]
    aggregators = [aggregator_report(aggregate, pss, legs, address, port)
                   for aggregate in plan["aggregates"]]
    for worker_legs_ in legs.values():
        for leg in worker_legs_:
            leg.update(address=address[leg["host"]], port=port[pss[leg["shard"]]])
    return_mbps = sum(shard["return"]["rate_mbps"] for shard in shards)
    model_mbit = gradient_mbit(request, len(pss))
    predicted_s = max(model_mbit / plan["theta_mbps"], model_mbit / return_mbps)
    return {"workers": list(request["workers"]),
            "model_bytes": model_bytes,
            "fragment_bytes": size,
            "fragments": fragment_count(model_bytes, size),
            "placement": placement,
            "aggregation": request["aggregation"],
            "gather": request.get("gather", False),   # a job saved before: false
            "scatter": request.get("scatter", False),
            "turns_with": request.get("turns_with"),
            "returns": returns_of(request),
            "shards": shards,
            "destinations": legs,
            "aggregators": aggregators,
            "trees": [tree["id"] for tree in trees],
            "addresses": dict(address),
            "predicted_round_s": predicted_s}


def shard_report(ps, trees, fragments, size, model_bytes, address, port, summed_mbps):
    """One shard: its host, the fragments and bytes it holds, and its return trees (one
    to every other worker, or one to each alone), all at one rate; a scatter job's shard
    has none, and its rate is the one its sums complete at (summed_mbps)."""
    first, last = fragments
    return {"host": ps,
            "address": address[ps],
            "port": port[ps],
            "fragments": [first, last],
            "bytes": [first * size, min(last * size, model_bytes)],
            "return": {"port": port[ps],
                       "rate_mbps": trees[0]["bandwidth_mbps"] if trees else summed_mbps,
                       "trees": [{"tree": tree["id"],
                                  "group": tree["address"],
                                  "receivers": tree["receivers"]} for tree in trees]}}


def aggregator_report(aggregate, pss, legs, address, port):
    """One aggregator's part: the shard it sums for, its rate, and the fragments of each
    of its workers that come to it."""
    host, shard = aggregate["aggregator"], pss.index(aggregate["ps"])
    workers = {w: leg["fragments"] for w in aggregate["workers"] for leg in legs[w]
               if leg["host"] == host and leg["shard"] == shard}
    return {"host": host,
            "address": address[host],
            "shard": shard,
            "port": port[aggregate["ps"]],
            "rate_mbps": aggregate["rate_mbps"],
            "workers": workers}
