"""The published REST contract names everything the apps handle: every status they answer
and every header they read or send is in the OpenAPI description, read from the apps'
own code, so that a header cannot be dropped from the description while an app still
implements it."""

import ast
from pathlib import Path

from syncfabric.operator import openapi

APPS = Path(__file__).resolve().parents[2] / "apps"
LOWEST_STATUS, HIGHEST_STATUS = 200, 599


def apps_code():
    return [ast.parse(path.read_text()) for path in sorted(APPS.glob("*.py"))]


def statuses_the_apps_answer():
    """Every whole number of the apps' code that is an HTTP status (200-599): what they
    raise, map their errors to and answer with (their code has no other such number)."""
    return {node.value for tree in apps_code() for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and type(node.value) is int
            and LOWEST_STATUS <= node.value <= HIGHEST_STATUS}


def headers_the_apps_handle():
    """({headers read from a request}, {headers put on an answer}): the names in
    `x.headers.get("Name")` and `x.headers.update({"Name": ...})`."""
    read, sent = set(), set()
    for tree in apps_code():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Attribute)
                    and node.func.value.attr == "headers" and node.args):
                continue
            if node.func.attr == "get":
                read.add(node.args[0].value)
            elif node.func.attr == "update":
                sent.update(key.value for key in node.args[0].keys)
    return read, sent


def described_operations(spec):
    return [operation for item in spec["paths"].values()
            for method, operation in item.items() if method != "parameters"]


def described_statuses(spec):
    return {int(status) for operation in described_operations(spec)
            for status in operation["responses"]}


def described_request_headers(spec):
    """Header parameters, and Authorization where a bearer scheme is named."""
    names = {parameter["name"] for item in spec["paths"].values()
             for parameter in item.get("parameters", []) if parameter["in"] == "header"}
    names |= {parameter["name"] for operation in described_operations(spec)
              for parameter in operation.get("parameters", []) if parameter["in"] == "header"}
    schemes = spec["components"]["securitySchemes"].values()
    if any(scheme["type"] == "http" and scheme["scheme"] == "bearer" for scheme in schemes):
        names.add("Authorization")
    return names


def described_answer_headers(spec):
    return {name for operation in described_operations(spec)
            for answer in operation["responses"].values() for name in answer.get("headers", {})}


def test_the_apps_code_is_read_for_what_it_handles():
    """The readers find what is known to be there, so that an empty set cannot pass."""
    read, sent = headers_the_apps_handle()
    assert {"If-None-Match", "X-Release-Key", "Authorization"} <= read
    assert {"ETag", "Cache-Control"} <= sent
    assert {200, 201, 304, 400, 401, 403, 404, 409, 500, 503} <= statuses_the_apps_answer()


def test_every_status_an_app_answers_is_described():
    missing = statuses_the_apps_answer() - described_statuses(openapi.description())
    assert not missing, "the apps answer %s, which the description lacks" % sorted(missing)


def test_every_header_an_app_reads_or_sends_is_described():
    spec = openapi.description()
    read, sent = headers_the_apps_handle()
    assert read <= described_request_headers(spec), read - described_request_headers(spec)
    assert sent <= described_answer_headers(spec), sent - described_answer_headers(spec)


def test_the_etag_and_304_are_where_the_jobs_app_implements_them():
    spec = openapi.description()
    for path in ("/jobs", "/jobs/{item_id}"):
        operation = spec["paths"][path]["get"]
        assert "If-None-Match" in {p["name"] for p in operation["parameters"]}
        for status in ("200", "304"):
            assert set(operation["responses"][status]["headers"]) == {"ETag", "Cache-Control"}


def test_every_operation_may_need_the_token():
    """A read from beyond loopback needs it too, so no operation is without its 401."""
    for operation in described_operations(openapi.description()):
        assert operation["security"] == openapi.TOKEN_WHEN_CONFIGURED
        assert "401" in operation["responses"]
