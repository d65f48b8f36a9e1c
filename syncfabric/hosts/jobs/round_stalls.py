"""Why a worker's round has made no progress, and whether that fails it (FabricWorker).

A round that nothing came back for round_fail_s (ROUND_FAIL_S, or ROUND_FAIL_ROUNDS of
the round the controller predicts if longer) fails with an error naming the hosts it
waits for (blame), unless some worker has given it nothing yet while every shard's host
answers: a rank late to its call (one that saves a checkpoint, evaluates or loads data
while the others wait), not a lost one. As Gloo waits for such a rank up to its process
group's timeout (30 minutes by default), a round waits up to LATE_WORKER_S, saying once
in the log whom it waits for. Failing it at ROUND_FAIL_S ended 16 ranks' run of
experiments.collectives when one rank, on a machine 92% busy, came 4 s late to a call.

A worker whose host is lost also gives nothing: where its host held a shard (colocated
shards), that shard answers no repair request, and the round fails at round_fail_s as
before; where the shards are on hosts of their own, the others wait for it as for a
late rank (so would Gloo's, had its process not closed its connections).
"""

import logging
from functools import reduce
from operator import and_

from syncfabric.hosts.jobs.job_layout import JobError

LOG = logging.getLogger("syncfabric.hosts")
ROUND_FAIL_S = 4.0      # a round without progress this long fails (a host died, or is cut off),
ROUND_FAIL_ROUNDS = 2.0  # or this many of its predicted rounds if longer (a slow shared round)
LATE_WORKER_S = 1800.0  # how long a round waits for a worker that gave it nothing (torch's
#                         default process group timeout for Gloo)


def round_fail_s(layout):
    """How long a round of `layout`'s rates may go without progress before it fails:
    ROUND_FAIL_S, or ROUND_FAIL_ROUNDS of the round the controller predicts if longer (a
    slow shared round of 14 s on 8x8 failed after 4)."""
    return max(ROUND_FAIL_S, ROUND_FAIL_ROUNDS * (layout.predicted_round_s or 0.0))


def stalled(layout, own_nodes, current, now, fail_s):
    """The JobError that fails round `current` (worker_rounds.Round) at `now`
    (time.monotonic()), naming whom it waits for; None while nothing has been missing
    for fail_s yet, or while it waits for late workers only (up to LATE_WORKER_S)."""
    stalled_s = now - current.progress_at
    if stalled_s <= fail_s:
        return None
    settled = current.have | ~current.given()   # back, or not given (nothing to wait for)
    missing = missing_of(layout, own_nodes, current, settled, now, fail_s)
    late = late_workers(layout, settled, missing)
    if late and stalled_s <= LATE_WORKER_S:
        if not current.late_said:
            LOG.warning("round %d of job %d waits for %s: they have given it nothing in "
                        "%.3g s (late to the call?); it fails if they give nothing for "
                        "%.0f s", current.number, layout.id, ", ".join(late), stalled_s,
                        LATE_WORKER_S)
            current.late_said = True
        return None
    return JobError("round %d of job %d failed: nothing came back for %.3g s; %s"
                    % (current.number, layout.id, LATE_WORKER_S if late else fail_s,
                       blame(layout, settled, missing)))


def missing_of(layout, own_nodes, current, settled, now, fail_s):
    """{shard index: [[fragment, mask of workers missing], ...]} of each shard the round
    waits for (a fragment not `settled`), as the shard last said (this host's own
    shards: as they hold it now); None for a shard whose host answered no repair
    request within half of fail_s."""
    own = {node.shard.index: node for node in own_nodes}
    missing = {}
    for shard in layout.shards:
        if settled[shard.first:shard.last].all():
            continue
        if shard.index in own:
            sums = own[shard.index].rounds.get(current.number)
            missing[shard.index] = sums.missing() if sums is not None else []
        elif now - current.replies.get(shard.index, (0.0, []))[0] > fail_s / 2:
            missing[shard.index] = None
        else:
            missing[shard.index] = current.replies[shard.index][1]
    return missing


def late_workers(layout, settled, missing):
    """The workers missing from every fragment the round still waits for, where every
    shard's host answered (missing_of): ranks that have not joined the round yet, which
    alone keep it from going on. None where a host is silent or no worker is."""
    if any(pairs is None for pairs in missing.values()):
        return None
    masks = [int(mask) for pairs in missing.values() for index, mask in pairs
             if not settled[index]]
    everywhere = reduce(and_, masks) if masks else 0
    return [worker for worker, bit in layout.bit.items() if everywhere & bit] or None


def blame(layout, settled, missing):
    """Which hosts the round waits for: a shard's host that answers no repair request,
    or whoever should have carried the workers a shard still misses."""
    at_fault = set()
    for index, pairs in missing.items():
        shard = layout.shards[index]
        if pairs is None:
            at_fault.add("%s (shard %d's host) answers no repair request"
                         % (shard.host, shard.index))
            continue
        for fragment, mask in pairs:
            if settled[fragment]:   # this worker's own shard misses what it did not give
                continue
            for worker in (w for w, bit in layout.bit.items() if mask & bit):
                at_fault.add(carrier(layout, worker, fragment, shard))
    return "; ".join(sorted(at_fault)) or "no host named"


def carrier(layout, worker, index, shard):
    """Who should have brought `worker`'s fragment `index` to `shard`: an aggregator on
    its way, or the worker itself."""
    leg = layout.leg_of(worker, index)
    if leg is None:
        return "%s (shard %d's host) lacks its own part" % (worker, shard.index)
    if leg.host == shard.host:
        return "%s (sends its fragments to shard %d)" % (worker, shard.index)
    return "%s (carries %s's fragments to shard %d)" % (leg.host, worker, shard.index)
