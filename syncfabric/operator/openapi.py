"""The REST contract of the apps as an OpenAPI 3 description: the paths, what each
answers, and the schemas of openapi_schemas.py and openapi_job_schemas.py, built from the constants the request
parsers check (policies, cost models, limits), so that the description and the
parsers cannot drift apart. GET /openapi.json serves it (the
operations of the apps that are loaded); tests validate it with openapi-spec-validator,
compare it with the routes registered with Ryu's wsgi, and fuzz a live controller
against it with schemathesis.
"""

from syncfabric.operator.live_page import UI_ASSETS
from syncfabric.operator.openapi_schemas import SCHEMAS
from syncfabric.operator.openapi_types import INTEGER, NUMBER, OPENAPI_VERSION, STRING, obj, ref


ERRORS = {
    400: "malformed JSON, or a request the fabric cannot serve as asked",
    401: "a token is configured and the request changes state, or reads from beyond "
         "loopback, without `Authorization: Bearer <token>`",
    403: "the thing was created by another client: send its release key in X-Release-Key",
    404: "an unknown host, tree, round, plan or job",
    409: "no capacity left, or busy (released or being installed meanwhile)",
    500: "a switch rejected what was sent, or did not confirm it; nothing of it is left",
    503: "no fabric description loaded, or a switch it needs is not connected",
}


def json_content(schema):
    return {"application/json": {"schema": schema}}


def responses(success_status, success_schema, description, errors):
    answers = {str(success_status): {"description": description,
                                     "content": json_content(success_schema)}}
    for status in errors:
        answers[str(status)] = error_response(status)
    return answers


def error_response(status, description=None):
    return {"description": description or ERRORS[status], "content": json_content(ref("Error"))}


# a token, if one is set: always to change state, and to read from beyond loopback
TOKEN_WHEN_CONFIGURED = [{"bearerAuth": []}, {}]
RELEASE_KEY = {"name": "X-Release-Key", "in": "header", "required": False, "schema": STRING}
ITEM_ID = {"name": "item_id", "in": "path", "required": True, "schema": INTEGER}
IF_NONE_MATCH = {"name": "If-None-Match", "in": "header", "required": False, "schema": STRING,
                 "description": "the ETag of the last answer: 304, without a body, while no "
                                "job changed"}
JOB_ETAG = dict(IF_NONE_MATCH, description="the ETag of the last answer: 304, without a body, "
                                          "while the job's generation and lease hold")
WORKER_ROUND = [
    {"name": "worker", "in": "query", "required": False, "schema": STRING,
     "description": "a worker of the job, reading it between rounds (with round)"},
    {"name": "round", "in": "query", "required": False, "schema": INTEGER,
     "description": "the round that worker began last: from it the controller sets the "
                    "effective_round of new rates"},
    {"name": "comm_s", "in": "query", "required": False, "schema": NUMBER,
     "description": "seconds that worker's last round took to come back (with round): the "
                    "job's iteration, for interleaving"},
    {"name": "compute_s", "in": "query", "required": False, "schema": NUMBER,
     "description": "seconds its caller took between that round's sum and the next round"},
    {"name": "borrowed_mbps", "in": "query", "required": False, "schema": NUMBER,
     "description": "the rate that worker borrows beyond its floor now"},
    {"name": "back", "in": "query", "required": False, "schema": INTEGER,
     "description": "the round every round that worker began is back through: computing "
                    "with none out, it holds no new rates' effective_round"},
    {"name": "paced", "in": "query", "required": False, "schema": INTEGER,
     "description": "the oldest generation whose rates that worker's rounds out were sent "
                    "at: the old meters stay until they are back"},
    {"name": "done", "in": "query", "required": False, "schema": INTEGER,
     "description": "1: that worker ends and begins no more rounds (new rates need not "
                    "wait for it)"}]
# what a 200 and a 304 of GET /jobs and GET /jobs/<id> carry: the version to send back
VERSION_HEADERS = {
    "ETag": {"schema": STRING, "description": "a weak tag of this version: send it back in "
                                              "If-None-Match"},
    "Cache-Control": {"schema": STRING, "description": "no-store: the answer's lease and "
                                                       "expiry count down under one tag"}}
DAEMON_HOST = {"name": "host", "in": "query", "required": False, "schema": STRING,
               "description": "an aggregator daemon's host, polling: a job it serves is "
                              "released once it stops polling for the job's lease time (30 s "
                              "without a lease)"}


def resource_paths(prefix, collection, noun, request_schema, item_schema, list_schema):
    """The create/list/show/release operations of one resource_api collection (None: the
    collection is `prefix` itself, as /jobs)."""
    created = {"allOf": [ref(item_schema), obj({"release_key": STRING}, required=["release_key"])]}
    released = obj({"released": ref(item_schema)}, required=["released"])
    tag, path = prefix, "/%s" % prefix if collection is None else "/%s/%s" % (prefix, collection)
    return {
        path: {
            "post": {
                "operationId": "create_%s" % noun, "tags": [tag], "summary": "create a %s" % noun,
                "security": TOKEN_WHEN_CONFIGURED,
                "description": "The answer's release_key (the X-Release-Key sent, or a new "
                               "one) is what its DELETE must carry.",
                "parameters": [RELEASE_KEY],
                "requestBody": {"required": True, "content": json_content(ref(request_schema))},
                "responses": responses(201, created, "created, installed and confirmed by "
                                       "every switch", (400, 401, 404, 409, 500, 503))},
            "get": {"operationId": "list_%ss" % noun, "tags": [tag],
                    "summary": "the live %ss" % noun,
                    "responses": responses(200, ref(list_schema), "every live %s" % noun, ())}},
        path + "/{item_id}": {
            "parameters": [ITEM_ID],
            "get": {"operationId": "show_%s" % noun, "tags": [tag], "summary": "one %s" % noun,
                    "responses": responses(200, ref(item_schema), "the %s" % noun, (404,))},
            "delete": {"operationId": "release_%s" % noun, "tags": [tag],
                       "summary": "release a %s: its switch state and bandwidth" % noun,
                       "security": TOKEN_WHEN_CONFIGURED, "parameters": [RELEASE_KEY],
                       "responses": responses(200, released, "released", (401, 403, 404))}},
    }


def job_paths():
    """The jobs, their lease, and 503 while a restarted controller restores its jobs."""
    paths = resource_paths("jobs", None, "job", "JobRequest", "Job", "JobList")
    for path, method in (("/jobs", "get"), ("/jobs/{item_id}", "get"),
                         ("/jobs/{item_id}", "delete")):
        paths[path][method]["responses"]["503"] = error_response(
            503, "the controller restarted and is restoring its jobs")
    paths["/jobs"]["get"]["responses"]["304"] = {"description": "no job changed since that ETag"}
    paths["/jobs"]["get"]["parameters"] = [IF_NONE_MATCH, DAEMON_HOST]
    paths["/jobs/{item_id}"]["get"]["parameters"] = [JOB_ETAG] + WORKER_ROUND
    paths["/jobs/{item_id}"]["get"]["responses"]["304"] = {
        "description": "the job did not change since that ETag"}
    for path in ("/jobs", "/jobs/{item_id}"):
        for status in ("200", "304"):
            paths[path]["get"]["responses"][status]["headers"] = VERSION_HEADERS
    paths["/jobs/{item_id}"]["get"]["responses"]["404"] = error_response(
        404, "no such job; one released lately says why in `released` (its lease ran out, "
             "it lost a part, or a daemon stopped answering)")
    paths["/jobs/{item_id}/lease"] = {
        "parameters": [ITEM_ID],
        "put": {"operationId": "renew_job", "tags": ["jobs"],
                "summary": "renew a job's lease: ttl_s from now (null: no lease)",
                "description": "The job's owner (X-Release-Key) keeps a job with a lease alive "
                               "while it runs; a job left unrenewed is released when its lease "
                               "runs out, also after a controller restart.",
                "security": TOKEN_WHEN_CONFIGURED, "parameters": [RELEASE_KEY],
                "requestBody": {"required": True, "content": json_content(ref("JobLease"))},
                "responses": responses(200, ref("Job"), "renewed", (400, 401, 403, 404, 503))}}
    return paths


def fabric_paths():
    return {
        "/fabric/topology": {
            "get": {"operationId": "get_topology", "tags": ["fabric"],
                    "summary": "the fabric description, each switch marked connected and synced",
                    "responses": responses(200, ref("Topology"), "the description", ())},
            "put": {"operationId": "put_topology", "tags": ["fabric"],
                    "summary": "adopt a fabric description (releases every tree and plan)",
                    "security": TOKEN_WHEN_CONFIGURED,
                    "requestBody": {"required": True,
                                    "content": json_content(ref("FabricDescription"))},
                    "responses": responses(200, ref("Topology"), "adopted", (400, 401))}},
        "/fabric/policy": {
            "get": {"operationId": "get_policy", "tags": ["fabric"],
                    "summary": "how jobs share the fabric",
                    "responses": responses(200, ref("Policy"), "the policy", ())},
            "put": {"operationId": "put_policy", "tags": ["fabric"],
                    "summary": "choose how jobs share the fabric; live jobs move to the "
                               "shares it gives them",
                    "security": TOKEN_WHEN_CONFIGURED,
                    "requestBody": {"required": True,
                                    "content": json_content(ref("PolicyRequest"))},
                    "responses": responses(200, ref("Policy"), "adopted", (400, 401))}},
        "/fabric/links": {
            "get": {"operationId": "get_links", "tags": ["fabric"],
                    "summary": "every directed link's capacity, reservations, rate and "
                               "utilization",
                    "responses": responses(200, ref("Links"), "the links", ())}},
    }


def operator_paths():
    return {
        "/openapi.json": {"get": {"operationId": "get_openapi", "tags": ["operator"],
                                  "summary": "this description (of the apps loaded)",
                                  "responses": {"200": {"description": "OpenAPI 3",
                                                        "content": json_content(
                                                            {"type": "object"})}}}},
        "/metrics": {"get": {"operationId": "get_metrics", "tags": ["operator"],
                             "summary": "Prometheus metrics (text exposition format)",
                             "responses": {"200": {"description": "metrics", "content": {
                                 "text/plain": {"schema": STRING}}}}}},
        "/ui": {"get": {"operationId": "get_ui", "tags": ["operator"],
                        "summary": "the live page of the fabric, trees, plans and rounds",
                        "responses": {"200": {"description": "HTML", "content": {
                            "text/html": {"schema": STRING}}}}}},
        "/ui/{asset}": {"get": {"operationId": "get_ui_asset", "tags": ["operator"],
                                "summary": "the page's script and style",
                                "parameters": [{"name": "asset", "in": "path", "required": True,
                                                "schema": {"type": "string",
                                                           "enum": sorted(UI_ASSETS)}}],
                                "responses": {
                                    "200": {"description": "the asset", "content": {
                                        "text/javascript": {"schema": STRING},
                                        "text/css": {"schema": STRING}}},
                                    "404": {"description": "no such asset",
                                            "content": json_content(ref("Error"))}}}},
    }


def with_the_token_where_configured(paths):
    """With a token configured, every operation may need it: a state-changing one always,
    a read from beyond loopback too (/metrics, /openapi.json and /ui unless
    SYNCFABRIC_REST_OPEN_READS opens them). So every operation names the optional
    requirement and its 401."""
    for item in paths.values():
        for method, operation in item.items():
            if method != "parameters":
                operation.setdefault("security", TOKEN_WHEN_CONFIGURED)
                operation["responses"].setdefault("401", error_response(401))
    return paths


def description():
    """The whole description, every app's operations."""
    paths = {**fabric_paths(), **operator_paths(),
             **resource_paths("multicast", "trees", "tree", "TreeRequest", "Tree", "TreeList"),
             **resource_paths("selmcast", "rounds", "round", "RoundRequest", "Round",
                              "RoundList"),
             **resource_paths("ina", "plans", "plan", "PlanRequest", "Plan", "PlanList"),
             **job_paths()}
    with_the_token_where_configured(paths)
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "syncfabric controller", "version": "0.1.0",
                 "description": "Path-aware multicast trees with reserved bandwidth, SELMCAST "
                                "rounds, in-network aggregation plans and streaming-round "
                                "jobs on an OpenFlow fabric. With a token (SYNCFABRIC_REST_TOKEN), "
                                "POST, PUT, DELETE and reads from beyond loopback need it."},
        "servers": [{"url": "/"}],
        "paths": paths,
        "components": {"schemas": SCHEMAS, "securitySchemes": {
            "bearerAuth": {"type": "http", "scheme": "bearer",
                           "description": "the controller's SYNCFABRIC_REST_TOKEN"}}},
    }


def operations(spec):
    """{(path, METHOD)} of a description."""
    return {(path, method.upper()) for path, item in spec["paths"].items()
            for method in item if method != "parameters"}


def served(registered):
    """The description of just the operations in `registered` ({(path, METHOD)}): those
    of the apps this controller loaded."""
    spec = description()
    spec["paths"] = {path: {method: operation for method, operation in item.items()
                            if method == "parameters" or (path, method.upper()) in registered}
                     for path, item in spec["paths"].items()}
    spec["paths"] = {path: item for path, item in spec["paths"].items()
                     if set(item) - {"parameters"}}
    return spec
