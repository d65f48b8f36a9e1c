"""The schemas of the REST contract (apps/): what each request and answer holds, built
from the constants the request parsers check (policies, cost models, limits), so that
they cannot drift apart. The fabric, trees, SELMCAST rounds and INA plans are here, the
jobs in openapi_job_schemas.py; openapi.py puts them together with the paths."""

from syncfabric.decisions import multicast_trees
from syncfabric.decisions.fabric_view import HOST_ROLES
from syncfabric.decisions.selection_round import COST_MODELS
from syncfabric.operator.openapi_job_schemas import JOB_SCHEMAS
from syncfabric.operator.openapi_types import (BOOLEAN, INTEGER, IPV4, MAX_DPID, NAME, NAMES,
                                               NON_NEGATIVE_INTEGER, NUMBER, PATH, PORT,
                                               POSITIVE, RATIO_MAP, STRING, TTL, array, choice,
                                               described, mapping, nullable, obj, one_of, ref)
from syncfabric.services import ina_plans, selmcast_rounds

MAC = {"type": "string", "pattern": "^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$"}

ERROR = obj({
    "error": described(STRING, "what was wrong, and what to do next"),
    "max_feasible_mbps": described(NUMBER, "409 of a tree: the most bandwidth a tree to "
                                           "these receivers could get"),
    "theta_mbps": described(NUMBER, "409 of a plan: the rate left"),
    "bottleneck": described(STRING, "409 of a job: the link (tail->head) or aggregator on "
                                    "its way with least left"),
    "max_rate_mbps": described(NUMBER, "409 of a job: what is left on its bottleneck"),
    "held_by": described(array(INTEGER), "409 of a job: the jobs that load its bottleneck"),
    "released": described(STRING, "404 of a job released lately: why"),
}, required=["error"])

FABRIC_SCHEMAS = {
    "Switch": obj({
        "name": STRING,
        "dpid": {"type": "integer", "minimum": 1, "maximum": MAX_DPID},
        "role": described(STRING, "spine, leaf, core, aggregation, edge or switch"),
    }, required=["name", "dpid"]),
    "Link": obj({
        "a": NAME,
        "a_port": PORT,
        "b": NAME,
        "b_port": PORT,
        "capacity_mbps": POSITIVE,
    }, required=["a", "a_port", "b", "b_port", "capacity_mbps"]),
    "Host": obj({
        "name": STRING,
        "ip": IPV4,
        "mac": MAC,
        "switch": NAME,
        "port": PORT,
        "capacity_mbps": POSITIVE,
        "role": choice(HOST_ROLES),
        "aggregation_mbps": described(POSITIVE, "an aggregator's summing rate"),
    }, required=["name", "ip", "mac", "switch", "port", "capacity_mbps"]),
    "FabricDescription": obj({
        "switches": array(ref("Switch")),
        "links": array(ref("Link")),
        "hosts": array(ref("Host")),
    }, required=["switches", "links", "hosts"]),
    "Topology": obj({
        "switches": array({"allOf": [ref("Switch"), obj(
            {"connected": BOOLEAN, "synced": BOOLEAN}, required=["connected", "synced"])]}),
        "links": array(ref("Link")),
        "hosts": array(ref("Host")),
        "unknown_dpids": array(INTEGER),
    }, required=["switches", "links", "hosts", "unknown_dpids"]),
    "LinkState": obj({
        "src": NAME,
        "dst": NAME,
        "src_port": nullable(INTEGER),
        "dst_port": nullable(INTEGER),
        "kind": choice(["fabric", "host"]),
        "capacity_mbps": NUMBER,
        "reserved_mbps": NUMBER,
        "rate_mbps": nullable(NUMBER),
        "utilization": nullable(NUMBER),
    }, required=["src", "dst", "src_port", "dst_port", "kind", "capacity_mbps",
                 "reserved_mbps", "rate_mbps", "utilization"]),
    "Links": obj({
        "interval_s": NUMBER,
        "links": array(ref("LinkState")),
    }, required=["interval_s", "links"]),
}

TREE_SCHEMAS = {
    "TreeRequest": obj({
        "source": NAME,
        "receivers": array(NAME, minItems=1),
        "bandwidth_mbps": POSITIVE,
        "policy": choice(multicast_trees.POLICIES, default=multicast_trees.PATH_AWARE),
        "ttl_s": TTL,
    }, required=["source", "receivers", "bandwidth_mbps"], additional=False,
        example={"source": "h1", "receivers": ["h2", "h3"], "bandwidth_mbps": 2}),
    "Tree": obj({
        "id": INTEGER,
        "address": IPV4,
        "source": NAME,
        "receivers": PATH,
        "policy": STRING,
        "bandwidth_mbps": NUMBER,
        "edges": array(array(NAME, minItems=2, maxItems=2)),
        "backup_uplinks": described(
            array(array(NAME, minItems=3, maxItems=3)),
            "[switch, uplink neighbour, backup neighbour]: where the switch sends the tree "
            "by itself while the uplink is down (local repair; not reserved)"),
        "reservation": obj({
            "bandwidth_mbps": NUMBER,
            "links": INTEGER,
            "expires_in_s": nullable(NUMBER),
        }, required=["bandwidth_mbps", "links", "expires_in_s"]),
    }, required=["id", "address", "source", "receivers", "policy", "bandwidth_mbps", "edges",
                 "backup_uplinks", "reservation"]),
    "TreeList": obj({"trees": array(ref("Tree"))}, required=["trees"]),
}

ROUND_SCHEMAS = {
    "RoundRequest": obj({
        "job": {"type": "string", "minLength": 1},
        "workers": array(NAME, minItems=2, uniqueItems=True),
        "update_mb": one_of("each worker's update: one size, or one per worker",
                            POSITIVE, array(POSITIVE, minItems=2)),
        "p": one_of("each worker's staleness: one, or one per worker",
                    NON_NEGATIVE_INTEGER, array(NON_NEGATIVE_INTEGER, minItems=2)),
        "k": {"type": "integer", "minimum": 1, "default": selmcast_rounds.DEFAULT_K},
        "cost_model": choice(COST_MODELS),
        "policy": choice(selmcast_rounds.POLICIES),
        "tree_policy": choice(selmcast_rounds.TREE_POLICIES),
        "ttl_s": TTL,
    }, required=["job", "workers", "update_mb", "p"], additional=False,
        example={"job": "sync", "workers": ["h1", "h2", "h3"], "update_mb": 1, "p": 1}),
    "Round": obj({
        "id": INTEGER,
        "job": STRING,
        "round": INTEGER,
        "workers": PATH,
        "policy": STRING,
        "cost_model": STRING,
        "t_s": NUMBER,
        "lower_bound_s": NUMBER,
        "normalized_completion": nullable(NUMBER),
        "multicast_scale": NUMBER,
        "forced_pairs": INTEGER,
        "assignment": mapping(PATH),
        "trees": array(obj({
            "id": INTEGER,
            "source": NAME,
            "receivers": PATH,
            "address": STRING,
            "bandwidth_mbps": NUMBER,
        }, required=["id", "source", "receivers", "address", "bandwidth_mbps"])),
    }, required=["id", "job", "round", "workers", "policy", "cost_model", "t_s",
                 "lower_bound_s", "assignment", "trees"]),
    "RoundList": obj({"rounds": array(ref("Round"))}, required=["rounds"]),
}

PLAN_LEG = obj({
    "ps": NAME,
    "node": NAME,
    "path": PATH,
    "share": NUMBER,
    "rate_mbps": NUMBER,
}, required=["ps", "node", "path", "share", "rate_mbps"])
PLAN_AGGREGATE = obj({
    "aggregator": NAME,
    "ps": NAME,
    "workers": PATH,
    "path": PATH,
    "rate_mbps": NUMBER,
}, required=["aggregator", "ps", "workers", "path", "rate_mbps"])

PLAN_SCHEMAS = {
    "PlanRequest": obj({
        "job": {"type": "string", "minLength": 1},
        "workers": array(NAME, minItems=1, uniqueItems=True),
        "ps": one_of("the PS, or the PSs of a sharded (InArt) job",
                     NAME, array(NAME, minItems=1, maxItems=ina_plans.MAX_PSS, uniqueItems=True)),
        "aggregators": nullable(described(NAMES, "default: every aggregator")),
        "gradient_mb": POSITIVE,
        "policy": choice(ina_plans.POLICIES),
    }, required=["job", "workers", "ps", "gradient_mb"], additional=False,
        example={"job": "train", "workers": ["h1", "h2", "h3"], "ps": "h4", "gradient_mb": 1}),
    "Plan": obj({
        "id": INTEGER,
        "job": STRING,
        "policy": STRING,
        "revision": described(INTEGER, "how often the plan was moved around a fault; a job "
                                       "that sees it change reads the plan again"),
        "ps": {"oneOf": [NAME, PATH]},
        "split": RATIO_MAP,
        "ports": mapping(INTEGER),
        "gradient_mb": NUMBER,
        "theta_mbps": NUMBER,
        "theta_lp_mbps": NUMBER,
        "theta_rounded_mbps": NUMBER,
        "rounded_overload": NUMBER,
        "theta_repaired_mbps": NUMBER,
        "theta_bound_mbps": NUMBER,
        "optimality_gap": NUMBER,
        "predicted_comm_time_s": NUMBER,
        "workers": mapping(array(PLAN_LEG)),
        "aggregates": array(PLAN_AGGREGATE),
        "addresses": mapping(STRING),
        "port": INTEGER,
        "aggregators": mapping(obj({"workers": PATH, "path": PATH, "rate_mbps": NUMBER})),
    }, required=["id", "revision", "job", "policy", "ps", "split", "ports", "gradient_mb",
                 "theta_mbps", "theta_bound_mbps", "optimality_gap", "predicted_comm_time_s",
                 "workers", "aggregates", "addresses"]),
    "PlanList": obj({"plans": array(ref("Plan"))}, required=["plans"]),
}

SCHEMAS = {"Error": ERROR, **FABRIC_SCHEMAS, **TREE_SCHEMAS, **ROUND_SCHEMAS, **PLAN_SCHEMAS,
           **JOB_SCHEMAS}
