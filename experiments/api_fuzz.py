"""Fuzz the controller's REST API against its own OpenAPI description with schemathesis:
every operation, with examples that follow the description and examples that break it,
against a live controller over a small Mininet fabric.

    python -m experiments.api_fuzz --examples 2000 --out results/api_fuzz.csv   # make fuzz-api

Every answer must be no 5xx (a documented 503 aside), a documented status, content type
and body, and a refusal for data the description rules out. Every tree, round or plan a
fuzzed request creates is released at once with its key, and must leave nothing: its
GET answers 404 and no bandwidth stays reserved. After the fuzz, the switches must hold
no group, meter or flow of a tree or plan. A fuzzed PUT /fabric/topology that the
controller adopts is undone (the testbed's description is put back) before the next
operation. Prints a row per operation and writes CSV + PNG; exits 1 on any failure.
"""

import sys
from collections import Counter
from pathlib import Path

import hypothesis
import requests
import schemathesis
from hypothesis import strategies
from schemathesis import checks
from schemathesis.core.failures import FailureGroup
from tqdm import tqdm

from experiments.cli import experiment_parser, progress_printer, write_csv
from experiments.plots.robustness import plot_api_fuzz
from experiments.testbed import FabricTestbed
from mininet_topos.platform_net import PlatformError
from mininet_topos.spineleaf import SpineLeafTopo

COLUMNS = ["operation", "examples", "statuses", "server_errors", "schema_violations",
           "negative_accepted", "created", "leaks", "first_failure"]
CONFORMANCE = (checks.status_code_conformance, checks.content_type_conformance,
               checks.response_schema_conformance, checks.response_headers_conformance)
DOCUMENTED_SERVER_ERROR = 503
say = progress_printer("api_fuzz")


def parse_args(argv):
    parser = experiment_parser("experiments.api_fuzz", __doc__)
    parser.add_argument("--examples", type=int, default=200,
                        help="examples per operation (default %(default)s; make fuzz-api: 2000)")
    parser.add_argument("--seed", type=int, default=0, help="hypothesis seed")
    parser.add_argument("--out", type=Path, default=Path("results/api_fuzz.csv"),
                        help="CSV to write (and a PNG beside it)")
    parser.add_argument("--of-port", type=int, default=6653, help="controller's OpenFlow port")
    parser.add_argument("--rest-port", type=int, default=8080, help="controller's REST port")
    return parser.parse_args(argv)


def fuzz_topo():
    """2 spines, 2 leaves, 2 hosts each and an aggregator on each spine: every API has
    something to create."""
    return SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=2, bw=20, aggregators="spines",
                         aggregator_bw=9)


class Session:
    """The fuzz's view of one controller: its URL and token, and the checks that only a
    live controller can answer (what a release leaves, the fabric it was given)."""

    def __init__(self, base_url, token, description):
        self.base_url, self.description = base_url, description
        self.headers = {"Authorization": "Bearer %s" % token}

    def url(self, path):
        return self.base_url + path

    def create_example(self, path):
        """Create a tree, round or plan from the description's example for POST `path`."""
        spec = requests.get(self.url("/openapi.json"), timeout=30).json()
        reference = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]
        example = spec["components"]["schemas"][reference["schema"]["$ref"].split("/")[-1]]["example"]
        created = requests.post(self.url(path), json=example, headers=self.headers, timeout=60)
        created.raise_for_status()
        return created.json()

    def release_leaves_nothing(self, path, created):
        """Release what a fuzzed POST created; None if nothing is left, else what is."""
        item = "%s/%s" % (path, created["id"])
        released = requests.delete(self.url(item), timeout=30,
                                   headers=dict(self.headers, **{"X-Release-Key": created["release_key"]}))
        if released.status_code != 200:
            return "DELETE %s answered %d" % (item, released.status_code)
        if requests.get(self.url(item), timeout=30).status_code != 404:
            return "GET %s still answers after its DELETE" % item
        reserved = [link for link in requests.get(self.url("/fabric/links"), timeout=30).json()["links"]
                    if link["reserved_mbps"] > 1e-9]
        if reserved:
            return "after DELETE %s, %d links still have bandwidth reserved" % (item, len(reserved))
        return None

    def restore_fabric(self):
        """Put the testbed's description back if a fuzzed PUT replaced it; True if it did."""
        current = requests.get(self.url("/fabric/topology"), timeout=30).json()
        described = {key: current[key] for key in ("links", "hosts")}
        if described == {key: self.description[key] for key in ("links", "hosts")}:
            return False
        requests.put(self.url("/fabric/topology"), json=self.description, headers=self.headers,
                     timeout=30).raise_for_status()
        return True


def case_strategy(operation, live_id=None):
    """The description's own examples (they name the fuzz fabric's hosts, so creations
    succeed), examples that follow the description, and, where it rules anything out,
    examples that break it. live_id: a tree, round or plan that exists, which a third of
    an item operation's examples name (random ids find nothing)."""
    branches = [*operation.get_strategies_from_examples(),
                operation.as_strategy(schemathesis.GenerationMode.POSITIVE)]
    if live_id is not None:
        branches.append(operation.as_strategy(schemathesis.GenerationMode.POSITIVE,
                                              path_parameters={"item_id": live_id}))
    try:
        branches.append(operation.as_strategy(schemathesis.GenerationMode.NEGATIVE))
    except Exception:   # nothing to break: no parameters and no body
        pass
    return strategies.one_of(*branches)


def fuzz_operation(session, operation, examples, seed, live_id=None):
    """Send `examples` generated requests for one operation; its CSV row."""
    row = {"operation": operation.label, "examples": 0, "server_errors": 0, "schema_violations": 0,
           "negative_accepted": 0, "created": 0, "leaks": 0, "first_failure": ""}
    statuses = Counter()

    def failed(message):
        row["first_failure"] = row["first_failure"] or message[:300]

    @hypothesis.seed(seed)
    @hypothesis.settings(max_examples=examples, deadline=None, database=None,
                         suppress_health_check=list(hypothesis.HealthCheck),
                         phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate])
    @hypothesis.given(case=case_strategy(operation, live_id))
    def send(case):
        response = case.call(base_url=session.base_url, headers=session.headers, timeout=60)
        row["examples"] += 1
        statuses[response.status_code] += 1
        if response.status_code >= 500 and response.status_code != DOCUMENTED_SERVER_ERROR:
            row["server_errors"] += 1
            failed("%d on %s" % (response.status_code, case.as_curl_command(session.headers)))
        for check, column in [*((c, "schema_violations") for c in CONFORMANCE),
                              (checks.negative_data_rejection, "negative_accepted")]:
            try:
                case.validate_response(response, checks=[check], headers=session.headers)
            except FailureGroup as failure:   # a BaseExceptionGroup: `except Exception` misses it
                row[column] += 1
                lines = [line.strip() for line in str(failure).splitlines() if line.strip()]
                failed("%s: %s" % (column, " ".join(lines[1:4])))
        if operation.method.upper() == "POST" and response.status_code == 201:
            row["created"] += 1
            leak = session.release_leaves_nothing(operation.path, response.json())
            if leak:
                row["leaks"] += 1
                failed(leak)

    send()
    row["statuses"] = " ".join("%d:%d" % item for item in sorted(statuses.items()))
    return row


def fuzz(base_url, token, description, examples, seed=0):
    """Fuzz every operation the controller describes; [row per operation]. PUT
    /fabric/topology goes last, and any fabric it adopted is undone after each operation."""
    session = Session(base_url, token, description)
    schema = schemathesis.openapi.from_url(session.url("/openapi.json"))
    operations = [result.ok() for result in schema.get_all_operations()]
    operations.sort(key=lambda operation: operation.label == "PUT /fabric/topology")
    rows = []
    for operation in tqdm(operations, desc="operations", unit="op", file=sys.stderr):
        collection = operation.path.split("/{item_id}")[0]   # e.g. /jobs of /jobs/{item_id}/lease
        live = session.create_example(collection) if "{item_id}" in operation.path else None
        row = fuzz_operation(session, operation, examples, seed, live and live["id"])
        leak = live and session.release_leaves_nothing(collection, live)
        if leak:
            row["leaks"] += 1
            row["first_failure"] = row["first_failure"] or leak
        rows.append(row)
        if session.restore_fabric():
            say("%s replaced the fabric; the testbed's description is back" % operation.label)
    return rows


def failures(row):
    return sum(row[column] for column in ("server_errors", "schema_violations",
                                          "negative_accepted", "leaks"))


def run(args):
    topo = fuzz_topo()
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port, progress=say) as bed:
        rows = fuzz(bed.client.base_url, bed.token, bed.client.get("/fabric/topology"),
                    args.examples, args.seed)
        say("checking every switch for groups, meters and flows of trees and plans")
        leftovers = bed.leftovers()
    return rows, leftovers


def main(argv=None):
    args = parse_args(argv)
    try:
        rows, leftovers = run(args)
    except PlatformError as error:
        sys.exit("error: %s" % error)
    write_csv(rows, args.out, COLUMNS)
    print(plot_api_fuzz(args.out), file=sys.stderr)
    for row in rows:
        print("%-32s %5d examples  %-36s %d failures" % (row["operation"], row["examples"],
                                                         row["statuses"], failures(row)))
    total = sum(row["examples"] for row in rows)
    bad = sum(failures(row) for row in rows)
    print("%d operations, %d examples: %d server errors, %d schema violations, %d negative "
          "examples accepted, %d leaks; switch leftovers: %s"
          % (len(rows), total, sum(r["server_errors"] for r in rows),
             sum(r["schema_violations"] for r in rows), sum(r["negative_accepted"] for r in rows),
             sum(r["leaks"] for r in rows), leftovers or "none"))
    if bad or leftovers:
        for row in rows:
            if row["first_failure"]:
                print("%s: %s" % (row["operation"], row["first_failure"]))
        sys.exit(1)


if __name__ == "__main__":
    main()
