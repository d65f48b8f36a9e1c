"""The schemas of the REST contract (apps/): what each request and answer holds, built
from the constants the request parsers check (policies, cost models, limits), so that
they cannot drift apart. openapi.py puts them together with the paths."""

from syncfabric.decisions import model_shards, multicast_trees, round_planner
from syncfabric.decisions.fabric_view import HOST_ROLES, MAX_PORT
from syncfabric.decisions.selection_round import COST_MODELS
from syncfabric.services import ina_plans, jobs, selmcast_rounds, tenants

OPENAPI_VERSION = "3.0.3"
MAX_DPID = 2 ** 64 - 1


def ref(name):
    return {"$ref": "#/components/schemas/%s" % name}


def obj(properties, required=(), additional=True, example=None):
    schema = {"type": "object", "properties": properties}
    if example is not None:
        schema["example"] = example
    if required:
        schema["required"] = list(required)
    if not additional:
        schema["additionalProperties"] = False
    return schema


def array(items, **limits):
    return dict({"type": "array", "items": items}, **limits)


def nullable(schema):
    return dict(schema, nullable=True)


STRING = {"type": "string"}
NAME = {"type": "string", "description": "a host or switch name of the fabric description"}
NUMBER = {"type": "number"}
POSITIVE = {"type": "number", "exclusiveMinimum": True, "minimum": 0}
INTEGER = {"type": "integer"}
PORT = {"type": "integer", "minimum": 1, "maximum": MAX_PORT}
NAMES = array(NAME, uniqueItems=True)
PATH = array(NAME)
TTL = nullable(dict(POSITIVE, description="lease in seconds; null or absent: no lease"))
POLICY = {"type": "string", "enum": list(tenants.POLICIES),
          "description": "first-come: a job keeps the rate it was admitted with; fair: "
                         "max-min fair rates among the jobs that share a link or an "
                         "aggregator, planned again as jobs come and go; weighted: as fair, "
                         "in proportion to each job's weight"}
RATIO_MAP = {"type": "object", "additionalProperties": NUMBER}

SCHEMAS = {
    "Error": obj({"error": dict(STRING, description="what was wrong, and what to do next"),
                  "max_feasible_mbps": dict(NUMBER, description="409 of a tree: the most "
                                            "bandwidth a tree to these receivers could get"),
                  "theta_mbps": dict(NUMBER, description="409 of a plan: the rate left"),
                  "bottleneck": dict(STRING, description="409 of a job: the link (tail->head) "
                                     "or aggregator on its way with least left"),
                  "max_rate_mbps": dict(NUMBER, description="409 of a job: what is left on "
                                        "its bottleneck"),
                  "held_by": dict(array(INTEGER), description="409 of a job: the jobs that "
                                  "load its bottleneck"),
                  "released": dict(STRING, description="404 of a job released lately: why")},
                 required=["error"]),

    # --- the fabric ----------------------------------------------------------------
    "Switch": obj({"name": STRING, "dpid": {"type": "integer", "minimum": 1, "maximum": MAX_DPID},
                   "role": dict(STRING, description="spine, leaf, core, aggregation, edge or "
                                "switch")}, required=["name", "dpid"]),
    "Link": obj({"a": NAME, "a_port": PORT, "b": NAME, "b_port": PORT,
                 "capacity_mbps": POSITIVE}, required=["a", "a_port", "b", "b_port",
                                                      "capacity_mbps"]),
    "Host": obj({"name": STRING, "ip": {"type": "string", "format": "ipv4"},
                 "mac": {"type": "string", "pattern": "^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$"},
                 "switch": NAME, "port": PORT, "capacity_mbps": POSITIVE,
                 "role": {"type": "string", "enum": list(HOST_ROLES)},
                 "aggregation_mbps": dict(POSITIVE, description="an aggregator's summing rate")},
                required=["name", "ip", "mac", "switch", "port", "capacity_mbps"]),
    "FabricDescription": obj({"switches": array(ref("Switch")), "links": array(ref("Link")),
                              "hosts": array(ref("Host"))},
                             required=["switches", "links", "hosts"]),
    "Topology": obj({
        "switches": array({"allOf": [ref("Switch"), obj(
            {"connected": {"type": "boolean"}, "synced": {"type": "boolean"}},
            required=["connected", "synced"])]}),
        "links": array(ref("Link")), "hosts": array(ref("Host")),
        "unknown_dpids": array(INTEGER)}, required=["switches", "links", "hosts", "unknown_dpids"]),
    "LinkState": obj({
        "src": NAME, "dst": NAME, "src_port": nullable(INTEGER), "dst_port": nullable(INTEGER),
        "kind": {"type": "string", "enum": ["fabric", "host"]}, "capacity_mbps": NUMBER,
        "reserved_mbps": NUMBER, "rate_mbps": nullable(NUMBER), "utilization": nullable(NUMBER)},
        required=["src", "dst", "src_port", "dst_port", "kind", "capacity_mbps",
                  "reserved_mbps", "rate_mbps", "utilization"]),
    "Links": obj({"interval_s": NUMBER, "links": array(ref("LinkState"))},
                 required=["interval_s", "links"]),

    # --- multicast trees ---------------------------------------------------------------
    "TreeRequest": obj({
        "source": NAME, "receivers": array(NAME, minItems=1),
        "bandwidth_mbps": POSITIVE,
        "policy": {"type": "string", "enum": list(multicast_trees.POLICIES),
                   "default": multicast_trees.PATH_AWARE},
        "ttl_s": TTL}, required=["source", "receivers", "bandwidth_mbps"], additional=False,
        example={"source": "h1", "receivers": ["h2", "h3"], "bandwidth_mbps": 2}),
    "Tree": obj({
        "id": INTEGER, "address": {"type": "string", "format": "ipv4"}, "source": NAME,
        "receivers": PATH, "policy": STRING, "bandwidth_mbps": NUMBER,
        "edges": array(array(NAME, minItems=2, maxItems=2)),
        "backup_uplinks": {**array(array(NAME, minItems=3, maxItems=3)), "description":
                           "[switch, uplink neighbour, backup neighbour]: where the switch "
                           "sends the tree by itself while the uplink is down (local repair; "
                           "not reserved)"},
        "reservation": obj({"bandwidth_mbps": NUMBER, "links": INTEGER,
                            "expires_in_s": nullable(NUMBER)},
                           required=["bandwidth_mbps", "links", "expires_in_s"])},
        required=["id", "address", "source", "receivers", "policy", "bandwidth_mbps", "edges",
                  "backup_uplinks", "reservation"]),
    "TreeList": obj({"trees": array(ref("Tree"))}, required=["trees"]),

    # --- SELMCAST rounds ---------------------------------------------------------------
    "RoundRequest": obj({
        "job": {"type": "string", "minLength": 1},
        "workers": array(NAME, minItems=2, uniqueItems=True),
        "update_mb": {"oneOf": [POSITIVE, array(POSITIVE, minItems=2)],
                      "description": "each worker's update: one size, or one per worker"},
        "p": {"oneOf": [{"type": "integer", "minimum": 0},
                        array({"type": "integer", "minimum": 0}, minItems=2)],
              "description": "each worker's staleness: one, or one per worker"},
        "k": {"type": "integer", "minimum": 1, "default": selmcast_rounds.DEFAULT_K},
        "cost_model": {"type": "string", "enum": list(COST_MODELS)},
        "policy": {"type": "string", "enum": list(selmcast_rounds.POLICIES)},
        "tree_policy": {"type": "string", "enum": list(selmcast_rounds.TREE_POLICIES)},
        "ttl_s": TTL}, required=["job", "workers", "update_mb", "p"], additional=False,
        example={"job": "sync", "workers": ["h1", "h2", "h3"], "update_mb": 1, "p": 1}),
    "Round": obj({
        "id": INTEGER, "job": STRING, "round": INTEGER, "workers": PATH, "policy": STRING,
        "cost_model": STRING, "t_s": NUMBER, "lower_bound_s": NUMBER,
        "normalized_completion": nullable(NUMBER), "multicast_scale": NUMBER, "forced_pairs": INTEGER,
        "assignment": {"type": "object", "additionalProperties": PATH},
        "trees": array(obj({"id": INTEGER, "source": NAME, "receivers": PATH,
                            "address": STRING, "bandwidth_mbps": NUMBER},
                           required=["id", "source", "receivers", "address", "bandwidth_mbps"]))},
        required=["id", "job", "round", "workers", "policy", "cost_model", "t_s",
                  "lower_bound_s", "assignment", "trees"]),
    "RoundList": obj({"rounds": array(ref("Round"))}, required=["rounds"]),

    # --- INA plans ---------------------------------------------------------------------
    "PlanRequest": obj({
        "job": {"type": "string", "minLength": 1},
        "workers": array(NAME, minItems=1, uniqueItems=True),
        "ps": {"oneOf": [NAME, array(NAME, minItems=1, maxItems=ina_plans.MAX_PSS,
                                     uniqueItems=True)],
               "description": "the PS, or the PSs of a sharded (InArt) job"},
        "aggregators": nullable(dict(NAMES, description="default: every aggregator")),
        "gradient_mb": POSITIVE,
        "policy": {"type": "string", "enum": list(ina_plans.POLICIES)}},
        required=["job", "workers", "ps", "gradient_mb"], additional=False,
        example={"job": "train", "workers": ["h1", "h2", "h3"], "ps": "h4", "gradient_mb": 1}),
    "Plan": obj({
        "id": INTEGER, "job": STRING, "policy": STRING,
        "revision": dict(INTEGER, description="how often the plan was moved around a fault; "
                                              "a job that sees it change reads the plan again"),
        "ps": {"oneOf": [NAME, PATH]}, "split": RATIO_MAP,
        "ports": {"type": "object", "additionalProperties": INTEGER},
        "gradient_mb": NUMBER, "theta_mbps": NUMBER, "theta_lp_mbps": NUMBER,
        "theta_rounded_mbps": NUMBER, "rounded_overload": NUMBER, "theta_repaired_mbps": NUMBER,
        "theta_bound_mbps": NUMBER, "optimality_gap": NUMBER, "predicted_comm_time_s": NUMBER,
        "workers": {"type": "object", "additionalProperties": array(obj(
            {"ps": NAME, "node": NAME, "path": PATH, "share": NUMBER, "rate_mbps": NUMBER},
            required=["ps", "node", "path", "share", "rate_mbps"]))},
        "aggregates": array(obj({"aggregator": NAME, "ps": NAME, "workers": PATH, "path": PATH,
                                 "rate_mbps": NUMBER},
                                required=["aggregator", "ps", "workers", "path", "rate_mbps"])),
        "addresses": {"type": "object", "additionalProperties": STRING},
        "port": INTEGER,
        "aggregators": {"type": "object", "additionalProperties": obj(
            {"workers": PATH, "path": PATH, "rate_mbps": NUMBER})}},
        required=["id", "revision", "job", "policy", "ps", "split", "ports", "gradient_mb", "theta_mbps",
                  "theta_bound_mbps", "optimality_gap", "predicted_comm_time_s", "workers",
                  "aggregates", "addresses"]),
    "PlanList": obj({"plans": array(ref("Plan"))}, required=["plans"]),

    # --- jobs ----------------------------------------------------------------------------
    "JobRequest": obj({
        "workers": array(NAME, minItems=2, maxItems=jobs.MAX_WORKERS, uniqueItems=True),
        "model_bytes": {"type": "integer", "minimum": 1},
        "shards": {"oneOf": [{"type": "string", "enum": ["auto"]},
                             {"type": "integer", "minimum": 1, "maximum": round_planner.MAX_PSS}],
                   "description": "how many PS shards; auto: the count that predicts the "
                                  "shortest round"},
        "placement": {"type": "string", "enum": list(round_planner.PLACEMENTS),
                      "description": "shards on hosts of their own, in the workers' hosts, "
                                     "or whichever is faster"},
        "aggregation": {"type": "boolean", "description": "sum gradients in the aggregators"},
        "ttl_s": TTL,
        "mtu": {"type": "integer", "minimum": model_shards.MIN_MTU, "maximum": model_shards.MAX_MTU,
                "description": "the hosts' data-plane MTU (default 1500); each fragment fills "
                               "one datagram of it"},
        "weight": dict(POSITIVE, description="the job's weight in fair sharing (default 1)"),
        "min_rate_mbps": nullable(dict(POSITIVE, description="the gradient rate below which "
                                       "the job would rather not run (default: 10% of its "
                                       "workers' slowest link)"))},
        required=["workers", "model_bytes"], additional=False,
        example={"workers": ["h1", "h2", "h3"], "model_bytes": 1000000}),
    "Job": obj({
        "id": INTEGER,
        "generation": dict(INTEGER, description="goes up once the job's trees and plan moved "
                                                "around a fault, or its rates were planned "
                                                "again as other jobs came or went; read the "
                                                "job again then"),
        "effective_round": dict(INTEGER, description="the round (as its workers number them) "
                                "from which this generation's rates hold; the rounds before "
                                "it keep the previous ones"),
        "workers": PATH, "model_bytes": INTEGER, "fragment_bytes": INTEGER, "fragments": INTEGER,
        "placement": STRING, "aggregation": {"type": "boolean"},
        "shards": array(obj({"host": NAME, "address": STRING, "port": INTEGER,
                             "fragments": array(INTEGER), "bytes": array(INTEGER),
                             "return": obj({"tree": INTEGER, "group": STRING, "port": INTEGER,
                                            "rate_mbps": NUMBER})})),
        "destinations": {"type": "object", "description": "per worker, where each part of "
                         "each shard's fragments goes", "additionalProperties": array(obj(
                             {"shard": INTEGER, "host": NAME, "address": STRING, "port": INTEGER,
                              "fragments": array(INTEGER), "rate_mbps": NUMBER}))},
        "aggregators": array(obj({"host": NAME, "address": STRING, "shard": INTEGER,
                                  "port": INTEGER, "rate_mbps": NUMBER,
                                  "workers": {"type": "object",
                                              "additionalProperties": array(INTEGER)}})),
        "addresses": {"type": "object", "description": "the IP address of every host the job "
                      "uses", "additionalProperties": STRING},
        "trees": array(INTEGER), "plan": INTEGER, "predicted_round_s": NUMBER,
        "lower_bound_s": NUMBER, "ttl_s": nullable(NUMBER), "expires_in_s": nullable(NUMBER),
        "rate_mbps": dict(NUMBER, description="the workers' gradient rate the job was given"),
        "weight": NUMBER, "min_rate_mbps": NUMBER,
        "fair_share_mbps": dict(NUMBER, description="the rate weighted max-min fairness "
                                                    "gives it among the jobs installed now"),
        "bound_by": dict(STRING, description="what bounds its fair share: a link (a->b), an "
                                             "aggregator, or ceiling (its workers' links)")},
        required=["id", "generation", "workers", "model_bytes", "fragment_bytes", "fragments",
                  "shards", "destinations", "aggregators", "addresses", "predicted_round_s",
                  "lower_bound_s"]),
    "JobList": obj({"jobs": array(ref("Job"))}, required=["jobs"]),
    "PolicyRequest": obj({"policy": POLICY}, required=["policy"], additional=False,
                         example={"policy": "fair"}),
    "Policy": obj({"policy": POLICY, "policies": array(STRING)},
                  required=["policy", "policies"]),
    "JobLease": obj({"ttl_s": TTL}, required=["ttl_s"], additional=False, example={"ttl_s": 30}),
}
