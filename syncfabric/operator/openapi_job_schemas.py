"""The schemas of the jobs' REST contract (apps/job_controller.py): a job's request and
report, its lease, and how jobs share the fabric (the policy), built from the constants
the jobs service checks."""

from syncfabric.decisions import model_shards, round_planner
from syncfabric.operator.openapi_types import (BOOLEAN, INTEGER, NAME, NUMBER, PATH, POSITIVE,
                                               STRING, TTL, array, choice, described, mapping,
                                               nullable, obj, one_of, ref)
from syncfabric.services import job_requests, tenants

POLICY = choice(tenants.POLICIES, description=(
    "first-come: a job keeps the rate it was admitted with; fair: max-min fair rates among "
    "the jobs that share a link or an aggregator, planned again as jobs come and go; "
    "weighted: as fair, in proportion to each job's weight"))
BORROW = described(BOOLEAN, (
    "jobs send beyond their share (their floor, sent in the guaranteed class) in the "
    "borrowed class, which switches serve only from what guaranteed traffic leaves "
    "(docs/sharing.md); default false (true with interleave): shares are caps"))
INTERLEAVE = described(BOOLEAN, (
    "jobs that share a contended link take turns to communicate, each in a window of a "
    "common period (docs/sharing.md); needs borrow, which it turns on unless borrow "
    "says false; default false"))
BORROW_REPORT = nullable(obj({
    "dscp": described(INTEGER, "the DSCP that marks the borrowed class"),
    "ceiling_mbps": described(NUMBER, (
        "what each host sends in all at most: the workers' slowest link")),
    "aggregators_mbps": mapping({"type": "number", "minimum": 0}, (
        "per aggregator the job's gradients go through, what its workers may borrow into "
        "it in all: the job's floor's part of what the aggregator's bookings leave"))},
    required=["dscp", "ceiling_mbps", "aggregators_mbps"]))

SHARD = obj({
    "host": NAME,
    "address": STRING,
    "port": INTEGER,
    "fragments": array(INTEGER),
    "bytes": array(INTEGER),
    "return": obj({
        "port": INTEGER,
        "rate_mbps": described(NUMBER, "each of the shard's return trees' rate (a scatter "
                                       "job's: the rate its sums complete at)"),
        "trees": array(obj({
            "tree": INTEGER,
            "group": described(STRING, "the tree's multicast address, which its receivers join"),
            "receivers": PATH,
        }), description=("one tree to every other worker (returns: multicast), or one to "
                         "each of them alone (returns: unicast)")),
    }),
})
DESTINATION = obj({
    "shard": INTEGER,
    "host": NAME,
    "address": STRING,
    "port": INTEGER,
    "fragments": array(INTEGER),
    "rate_mbps": NUMBER,
})
AGGREGATOR_PART = obj({
    "host": NAME,
    "address": STRING,
    "shard": INTEGER,
    "port": INTEGER,
    "rate_mbps": NUMBER,
    "workers": mapping(array(INTEGER)),
})

JOB_REQUEST = obj({
    "workers": array(NAME, minItems=2, maxItems=job_requests.MAX_WORKERS, uniqueItems=True),
    "model_bytes": {"type": "integer", "minimum": 1},
    "shards": one_of("how many PS shards; auto: the count that predicts the shortest round",
                     choice(["auto"]),
                     {"type": "integer", "minimum": 1, "maximum": round_planner.MAX_PSS}),
    "placement": choice(round_planner.PLACEMENTS, description=(
        "shards on hosts of their own, in the workers' hosts, or whichever is faster")),
    "aggregation": described(BOOLEAN, "sum gradients in the aggregators"),
    "gather": described(BOOLEAN, (
        "true: an all-gather, each shard in one worker (in the workers' order) and its "
        "sums that worker's values alone, no gradients sent; default false")),
    "scatter": described(BOOLEAN, (
        "true: a reduce-scatter, each shard in one worker (in the workers' order) and its "
        "sums kept there, none returned; default false")),
    "turns_with": nullable(described({"type": "integer", "minimum": 1}, (
        "the id of a job of the same workers whose rounds never run while this one's do "
        "(a process group's all-reduce job beside its gather job): the pair is booked "
        "once, this job inside the other's booking and share; default null"))),
    "returns": choice(round_planner.RETURNS, description=(
        "multicast: each shard's sums go back on one tree; unicast: one copy per worker, "
        "each on a path of its own (the papers' baseline)")),
    "shard_hosts": nullable(array(NAME, minItems=1, maxItems=round_planner.MAX_PSS,
                                  uniqueItems=True, description=(
                                      "the hosts the shards are on (a PS named), each a host "
                                      "of its own; default: the planner's choice"))),
    "gradient_policy": nullable(choice(
        job_requests.ONE_PS_POLICIES + job_requests.SHARDED_POLICIES + (None,), description=(
            "how the gradients are planned: GRID's policy or a baseline's for one shard, "
            "InArt's or a baseline's for several (shards or shard_hosts say how many); "
            "default: the round planner's"))),
    "ttl_s": TTL,
    "mtu": {"type": "integer", "minimum": model_shards.MIN_MTU,
            "maximum": model_shards.MAX_MTU,
            "description": "the hosts' data-plane MTU (default 1500); each fragment fills "
                           "one datagram of it"},
    "weight": described(POSITIVE, "the job's weight in fair sharing (default 1)"),
    "borrow": described(BOOLEAN, (
        "false: the job sends only its share (its floor), even where the fabric lets jobs "
        "borrow what is idle (PUT /fabric/policy); default true")),
    "min_rate_mbps": nullable(described(POSITIVE, (
        "the gradient rate below which the job would rather not run (default: 10% of its "
        "workers' slowest link)"))),
}, required=["workers", "model_bytes"], additional=False,
    example={"workers": ["h1", "h2", "h3"], "model_bytes": 1000000})

JOB = obj({
    "id": INTEGER,
    "generation": described(INTEGER, (
        "goes up once the job's trees and plan moved around a fault, or its rates were "
        "planned again as other jobs came or went; read the job again then")),
    "effective_round": described(INTEGER, (
        "the round (as its workers number them) from which this generation's rates hold; "
        "the rounds before it keep the previous ones")),
    "workers": PATH,
    "model_bytes": INTEGER,
    "fragment_bytes": INTEGER,
    "fragments": INTEGER,
    "placement": STRING,
    "aggregation": BOOLEAN,
    "gather": described(BOOLEAN, "an all-gather job: each shard's sums are its own "
                                 "worker's values"),
    "scatter": described(BOOLEAN, "a reduce-scatter job: each shard's sums stay in its own "
                                  "worker, and its shards have no return trees"),
    "turns_with": nullable(described(INTEGER, "the job this one takes turns with, if any")),
    "returns": STRING,
    "shards": array(SHARD),
    "destinations": mapping(array(DESTINATION),
                            "per worker, where each part of each shard's fragments goes"),
    "aggregators": array(AGGREGATOR_PART),
    "addresses": mapping(STRING, "the IP address of every host the job uses"),
    "trees": array(INTEGER),
    "plan": INTEGER,
    "predicted_round_s": NUMBER,
    "lower_bound_s": described(NUMBER, (
        "no round of this job on these links is shorter: every link's volume, returns "
        "included (docs/streaming-round.md)")),
    "ring_round_s": nullable(described(NUMBER, (
        "what a ring all-reduce of the model over the workers takes on their free links "
        "(of a gather job: a ring all-gather): whether the fabric beats the ring for this "
        "job, before its first round"))),
    "ttl_s": nullable(NUMBER),
    "expires_in_s": nullable(NUMBER),
    "rate_mbps": described(NUMBER, "the workers' gradient rate the job was given"),
    "weight": NUMBER,
    "min_rate_mbps": NUMBER,
    "fair_share_mbps": described(NUMBER, (
        "the rate weighted max-min fairness gives it among the jobs installed now")),
    "borrow": described(BORROW_REPORT, (
        "null: the job's hosts send at its rates (its share is a cap); else they may "
        "borrow what is idle beyond them")),
    "borrowed_mbps": nullable(described(NUMBER, (
        "what its running workers say they borrow beyond their floors now, together; null "
        "until one says"))),
    "borrowed_by": described({"type": "object", "additionalProperties": NUMBER}, (
        "what each running worker says it borrows beyond its floor now (Mbit/s): each holds "
        "its own to what the least of them borrows for its floor")),
    "period_s": nullable(described(NUMBER, (
        "interleaving: the job starts its rounds at phase_offset_s + k x period_s on the "
        "hosts' clock (Unix time); null: whenever it likes"))),
    "phase_offset_s": nullable(described(NUMBER, "interleaving: its window's start in the period")),
    "window_s": nullable(described(NUMBER, (
        "interleaving: how long after its window's start a round may borrow; beyond it, "
        "a round that overran sends at its floor, in the next job's window"))),
    "window_mbps": nullable(described(NUMBER, (
        "interleaving: what its rounds send at in all (floor and borrowed) from their "
        "window's start: its rate alone, or less where the rounds of jobs that share a "
        "link with it meet its own (together they fill it to 0.85 at most)"))),
    "bound_by": described(STRING, (
        "what bounds its fair share: a link (a->b), an aggregator, or ceiling (its "
        "workers' links)")),
}, required=["id", "generation", "workers", "model_bytes", "fragment_bytes", "fragments",
             "shards", "destinations", "aggregators", "addresses", "predicted_round_s",
             "lower_bound_s"])

JOB_SCHEMAS = {
    "JobRequest": JOB_REQUEST,
    "Job": JOB,
    "JobList": obj({"jobs": array(ref("Job"))}, required=["jobs"]),
    "PolicyRequest": obj({"policy": POLICY, "borrow": BORROW, "interleave": INTERLEAVE},
                         required=["policy"], additional=False,
                         example={"policy": "fair", "interleave": True}),
    "Policy": obj({"policy": POLICY, "policies": array(STRING), "borrow": BORROW,
                   "interleave": INTERLEAVE},
                  required=["policy", "policies", "borrow", "interleave"]),
    "JobLease": obj({"ttl_s": TTL}, required=["ttl_s"], additional=False,
                    example={"ttl_s": 30}),
}
