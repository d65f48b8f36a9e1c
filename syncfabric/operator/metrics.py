"""Where the controller is measured: Prometheus metrics, named as faucet names its own
(the `syncfabric_` prefix, base units: bytes, seconds and ratios; `_total` on counters).

One registry per controller process (Services builds it), so that in-process tests can
run several controllers. Counters and histograms are updated where things happen;
what is live (link rates and reservations, trees, plans, rounds, switches) is read
from the services at scrape time by LiveState, so it can never go stale.
"""

from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram,
                               generate_latest)
from prometheus_client.core import GaugeMetricFamily

from syncfabric.services.job_shares import shares_of

BYTES_PER_MBIT = 1e6 / 8
CONTENT_TYPE = CONTENT_TYPE_LATEST
# OpenFlow batches confirm in milliseconds; planning a 100-worker job takes seconds
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


# what is counted and timed where it happens: attribute -> (metric name, documentation,
# labels); a Counter's name gets `_total` from prometheus_client
COUNTERS = {
    "rest_requests": (
        "syncfabric_rest_requests",
        "REST requests answered, by route template, method and status",
        ["route", "method", "status"]),
    "admissions": (
        "syncfabric_admissions",
        "trees, SELMCAST rounds, INA plans and jobs created",
        ["resource"]),
    "refusals": (
        "syncfabric_refusals",
        "creations refused with 409: no capacity, or busy",
        ["resource"]),
    "releases": (
        "syncfabric_releases",
        "trees, rounds, plans and jobs released, by cause: request (DELETE), lease "
        "(expired), reroute (no tree fits around a failure), daemon (a job's daemon "
        "stopped answering) or partner (the job a job took turns with is gone)",
        ["resource", "cause"]),
    "reroutes": (
        "syncfabric_reroutes",
        "live trees and INA plans moved off a failed link, by outcome: moved (plans: same "
        "nodes and rates), replanned (plans) or released",
        ["resource", "outcome"]),
    "reconciliations": (
        "syncfabric_reconciliations",
        "switches (re)synced after connecting: cleared, then given the fabric flows and "
        "every live tree and plan",
        ["switch"]),
    "admission_drops": (
        "syncfabric_admission_drops",
        "datagrams a switch dropped because they went to an INA plan's (a job's) UDP port "
        "from a host that is not a member of it, or with an address not its own",
        ["switch"]),
    "replans": (
        "syncfabric_job_replans",
        "live jobs whose rates were planned again as other jobs came or went (policy fair "
        "or weighted), by direction: shrink or grow",
        ["direction"]),
    "class_bytes": (
        "syncfabric_class_bytes",
        "bytes that entered the fabric in each traffic class where jobs' streams enter it: "
        "into a floor's meter (guaranteed) or a borrowed twin flow (borrowed)",
        ["switch", "class"]),
    "floor_policed_bytes": (
        "syncfabric_floor_policed_bytes",
        "bytes a floor's meter dropped: sent unmarked above a job's or tree's floor",
        ["switch"]),
    "unknown_switches": (
        "syncfabric_unknown_switch_connections",
        "connections of switches whose datapath id the fabric description lacks: they get "
        "no flows",
        []),
}
HISTOGRAMS = {
    "install_seconds": (
        "syncfabric_install_confirm_seconds",
        "from sending a batch of OpenFlow messages to the last switch's barrier reply, by "
        "outcome (confirmed or failed)",
        ["outcome"]),
    "reroute_seconds": (
        "syncfabric_reroute_seconds",
        "the controller's share of a reroute's gap: from the link change to the moved tree "
        "or plan confirmed by its switches",
        ["resource"]),
    "replan_seconds": (
        "syncfabric_job_replan_seconds",
        "a re-plan of live jobs' rates, from its decision to the last meter confirmed (a "
        "shrink waits for the jobs' workers to reach the round it takes effect from)",
        ["direction"]),
    "planning_seconds": (
        "syncfabric_planning_seconds",
        "computing a multicast tree, a SELMCAST round or an INA plan",
        ["kind"]),
}


class Metrics:
    """The registry, an attribute per counter and histogram (COUNTERS, HISTOGRAMS), and
    the live state read at scrape time (watch)."""

    def __init__(self):
        self.registry = CollectorRegistry()
        for attribute, (name, documentation, labels) in COUNTERS.items():
            setattr(self, attribute, Counter(name, documentation, labels,
                                             registry=self.registry))
        for attribute, (name, documentation, labels) in HISTOGRAMS.items():
            setattr(self, attribute, Histogram(name, documentation, labels,
                                               buckets=LATENCY_BUCKETS, registry=self.registry))

    def watch(self, services):
        """Also report the live state of `services` (a Services) at every scrape."""
        self.registry.register(LiveState(services))

    def exposition(self):
        """The text a scrape of GET /metrics receives."""
        return generate_latest(self.registry)


class LiveState:
    """A custom collector: gauges read from the services when scraped."""

    def __init__(self, services):
        self.services = services

    def collect(self):
        fabric = self.services.fabric
        yield from link_gauges(fabric.link_states())
        yield switch_gauge(fabric.topology_report()["switches"])
        for name, documentation, count in (
                ("syncfabric_trees", "live multicast trees (SELMCAST rounds' included)",
                 self.services.trees.live_count()),
                ("syncfabric_selmcast_rounds", "live SELMCAST rounds",
                 self.services.rounds.live_count()),
                ("syncfabric_ina_plans", "live INA plans", self.services.plans.live_count()),
                ("syncfabric_jobs", "live streaming-round jobs", self.services.jobs.live_count())):
            yield GaugeMetricFamily(name, documentation, value=count)
        yield from job_share_gauges(shares_of(self.services.jobs))


def link_gauges(links):
    """Each directed link's capacity, reservations, rate and utilization (the last two
    once its port counters were read twice), from Fabric.link_states()."""
    by_link = ["src", "dst"]
    capacity = GaugeMetricFamily(
        "syncfabric_link_capacity_bytes_per_second",
        "a directed link's capacity", labels=by_link)
    reserved = GaugeMetricFamily(
        "syncfabric_link_reserved_bytes_per_second",
        "bandwidth reserved on a directed link by trees, reroutes in progress and INA plans",
        labels=by_link)
    rate = GaugeMetricFamily(
        "syncfabric_link_rate_bytes_per_second",
        "a directed link's rate over the last port-counter interval", labels=by_link)
    utilization = GaugeMetricFamily(
        "syncfabric_link_utilization_ratio",
        "a directed link's rate over its capacity", labels=by_link)
    for link in links:
        ends = [link["src"], link["dst"]]
        capacity.add_metric(ends, link["capacity_mbps"] * BYTES_PER_MBIT)
        reserved.add_metric(ends, link["reserved_mbps"] * BYTES_PER_MBIT)
        if link["rate_mbps"] is not None:
            rate.add_metric(ends, link["rate_mbps"] * BYTES_PER_MBIT)
            utilization.add_metric(ends, link["utilization"])
    return [capacity, reserved, rate, utilization]


def switch_gauge(described):
    """The switches of the fabric description, connected and synced, from its report."""
    switches = GaugeMetricFamily("syncfabric_switches",
                                 "switches of the fabric description, by state",
                                 labels=["state"])
    switches.add_metric(["described"], len(described))
    switches.add_metric(["connected"], sum(s["connected"] for s in described))
    switches.add_metric(["synced"], sum(s["synced"] for s in described))
    return switches


def job_share_gauges(shares):
    """Each job's gradient rate and its fair share, from Jobs.shares()."""
    rate = GaugeMetricFamily(
        "syncfabric_job_rate_bytes_per_second",
        "a job's workers' gradient rate", labels=["job"])
    fair = GaugeMetricFamily(
        "syncfabric_job_fair_share_bytes_per_second",
        "the gradient rate weighted max-min fairness gives a job among the jobs installed now",
        labels=["job"])
    for job_id, share in sorted(shares.items()):
        rate.add_metric([str(job_id)], share["rate_mbps"] * BYTES_PER_MBIT)
        fair.add_metric([str(job_id)], share["fair_share_mbps"] * BYTES_PER_MBIT)
    return [rate, fair]
