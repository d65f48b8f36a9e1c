"""The streaming synchronous round: the model sharded over P PSs, each shard's gradient
fragments aggregated in the network on the way to its PS (the job's INA plan), and each
shard's sum returned at once, fragment by fragment, on a reserved path-aware multicast
tree from its PS to every worker. Gradient push and return overlap on the full-duplex
links, so a round's communication approaches S/B.

Per round (GradientCoordinator.run_round, with StreamReturn as its return phase):
1. the workers send their gradients as in experiments/traffic/gradients.py; a PS
   multicasts fragment k's sum (gradient_wire's datagram, every worker in its mask) as
   soon as it holds every worker in fragment k, paced at its tree's rate, while later
   fragments still arrive (stream_return.py);
2. once every PS holds every gradient, each PS sends what is still queued, the
   workers report the fragments they miss, and their PSs send those again (at a rate
   that backs off on loss), until every worker holds every shard;
3. checks (untimed): each PS's sum against the exact one, and every worker's copy of
   every shard against its PS's by SHA-256.
The round's communication time (`completed_s`) runs from "go" until the last worker
held every shard: when the slowest worker could start its next round. The reports of
step 2 (each waits for 50 ms of quiet) come after it.
The return is SwitchML's: the sum comes back and every worker applies the same step.
"""

import time
from contextlib import contextmanager

from syncfabric.hosts.gradient_wire import wire_mbit
from syncfabric.hosts.rate_control import LossAdaptiveRate
from syncfabric.hosts.wire import ranges

RETURN_REPAIR_BUDGET_S = 120.0


class StreamReturn:
    """The return phase of a streaming round (gradients.SumsStayAtThePss's interface):
    the PSs return their sums on trees (groups: {PS: tree address}, each reserved at
    return_mbps), repaired until every worker holds every shard."""

    def __init__(self, groups, return_mbps):
        self.groups, self.return_mbps = groups, return_mbps
        self.shards, self.digests = None, {}

    def extras(self, coordinator, name, role, held):
        self.shards = {p: list(held[p]) for p in coordinator.pss}
        if role == "worker":   # a co-located PS's own shard comes back in its host
            return {"returns": {"groups": [self.groups[p] for p in coordinator.pss if p != name],
                                "shards": [self.shards[p] for p in coordinator.pss]}}
        return {"return": {"ip": self.groups[name],
                           "rate_mbps": self.return_mbps * coordinator.rate_fraction}}

    def finish(self, coordinator, number, started):
        channels, pss, workers = coordinator.channels, coordinator.pss, coordinator.workers
        passes, first_pass_loss = 0, None
        resend = {ps: [] for ps in pss}
        rate = LossAdaptiveRate(self.return_mbps * coordinator.rate_fraction)
        fragments = sum(last - first for first, last in self.shards.values())
        while True:
            for ps in pss:
                channels[ps].send({"return": number, "fragments": resend[ps],
                                   "rate_mbps": rate.rate})
            coordinator.expect(pss, {"returned": number})
            for worker in workers:
                channels[worker].send({"return_report": number})
            reports = {w: channels[w].receive() for w in workers}
            lost = {w: {i for first, last in r["missing"] for i in range(first, last)}
                    for w, r in reports.items()}
            worst = max(len(indices) for indices in lost.values()) / fragments
            if first_pass_loss is None:
                first_pass_loss = sum(map(len, lost.values())) / (fragments * len(workers))
            if not any(lost.values()):
                break
            passes += 1
            if time.perf_counter() - started > RETURN_REPAIR_BUDGET_S:
                raise RuntimeError(
                    "round %d: after %.0f s, %s still miss returned fragments (%d passes at down "
                    "to %.2f Mbit/s): the platform is not carrying the trees (see `make "
                    "calibrate`, use a lower --bw)" % (number, RETURN_REPAIR_BUDGET_S,
                                                       ", ".join(w for w in lost if lost[w]),
                                                       passes, rate.lowest))
            union = set().union(*lost.values())
            resend = {ps: ranges(sorted(i for i in union if first <= i < last))
                      for ps, (first, last) in self.shards.items()}
            rate.update(worst, time.perf_counter())
        self.digests = {w: r["digests"] for w, r in reports.items()}
        return {"return_repair_passes": passes, "return_first_pass_loss": first_pass_loss,
                "completed_s": max(r["completed_at"] for r in reports.values()) - started}

    def returns_match(self, checks):
        """Whether every worker holds every shard as its PS summed it ({PS: "sum" answer})."""
        expected = [checks[ps]["digest"] for ps in self.shards]
        return all(digests == expected for digests in self.digests.values())

    def verdict(self, verdict, checks):
        returned = self.returns_match(checks)
        return dict(verdict, verified=verdict["verified"] and returned, returns_verified=returned)


@contextmanager
def stream_job(client, workers, pss, return_mbps, floats, job, aggregators=None):
    """Reserve every PS's return tree to the workers (its own host left out when it is a
    worker), then the job's INA plan on what the trees leave (equal shards; GRID for
    one PS); yields (plan, {PS: tree address}) and releases them all after."""
    trees = []
    try:
        for ps in pss:
            trees.append(client.request("POST", "/multicast/trees", {
                "source": ps, "receivers": [w for w in workers if w != ps], "policy": "path-aware",
                "bandwidth_mbps": return_mbps, "ttl_s": 3600}))
        request = {"job": job, "workers": list(workers), "ps": list(pss) if len(pss) > 1
                   else pss[0], "policy": "equal-split" if len(pss) > 1 else "grid",
                   "gradient_mb": wire_mbit(floats) / 8}
        if aggregators is not None:
            request["aggregators"] = list(aggregators)
        plan = client.request("POST", "/ina/plans", request)
        try:
            yield plan, {ps: tree["address"] for ps, tree in zip(pss, trees)}
        finally:
            client.request("DELETE", "/ina/plans/%d" % plan["id"])
    finally:
        for tree in trees:
            client.request("DELETE", "/multicast/trees/%d" % tree["id"])
