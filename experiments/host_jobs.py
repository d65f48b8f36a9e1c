"""A job for hosts joined by one switch (a Linux bridge, or loopback), planned by the
controller's own code without a controller: the fabric described, the round planned
(round_planner.plan_job), its gradient plan reported (ina_plans.plan_report) and the
hosts' job made of it (job_reports.round_report), as POST /jobs would answer.

Links are declared at 100 Gbit/s, so that pacing never binds: the CPU is the limit. The
MTU may be past what POST /jobs takes (9000: NICs' jumbo frames, and the switches' meter
buckets are sized for them): loopback and veth take datagrams of 64 KB."""

from syncfabric.decisions import round_planner
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.services.ina_plans import plan_report
from syncfabric.services.job_reports import gradient_mbit, round_report

LINK_MBPS = 100_000.0
JOB_ID = 1


def host_names(workers, shards, placement):
    """(worker names, the dedicated shard hosts' names: none when colocated)."""
    return (["w%d" % (i + 1) for i in range(workers)],
            ["ps%d" % (i + 1) for i in range(shards)] if placement == round_planner.DEDICATED else [])


def description(addresses):
    """One switch with every host ({name: IPv4}) on its own port at LINK_MBPS."""
    return {"switches": [{"name": "bridge", "dpid": 1}], "links": [],
            "hosts": [{"name": name, "switch": "bridge", "port": port, "ip": ip,
                       "mac": "02:00:00:00:%02x:%02x" % (port // 256, port % 256),
                       "capacity_mbps": LINK_MBPS}
                      for port, (name, ip) in enumerate(addresses.items(), start=1)]}


def plan_job(addresses, workers, model_bytes, placement, shards, mtu):
    """The hosts' job (GET /jobs/<id>'s answer) for `workers` with `shards` shards placed
    as `placement` says (dedicated: on the other hosts of `addresses`), its fragments
    datagrams that fill `mtu`."""
    view = FabricView(description(addresses))
    request = {"workers": list(workers), "model_bytes": model_bytes, "mtu": mtu,
               "aggregation": False}
    model_mbit = gradient_mbit(request, shards)
    plan = round_planner.plan_job(view, list(workers), model_mbit, placement, shards,
                                  aggregation=False)
    report = plan_report(JOB_ID, {"job": "host_allreduce", "workers": list(workers),
                                  "pss": plan.pss, "ps": plan.pss[0],
                                  "gradient_mb": model_mbit / 8}, plan.gradients, view)
    trees = [{"id": i + 1, "address": "239.66.0.%d" % (i + 1), "bandwidth_mbps": plan.return_mbps,
              "source": tree.source, "receivers": list(tree.receivers)}
             for i, tree in enumerate(plan.trees)]
    return dict(round_report(request, report, trees, placement), id=JOB_ID, generation=1)
