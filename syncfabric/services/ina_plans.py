"""The INA plans service (no Ryu): gradient steering to in-network aggregators, GRID
(Fang et al., IEEE/ACM ToN 2023) for one PS and InArt (Liu et al., WWW 2024) for a model
split over several.

A plan is made on what is free in the fabric's book (link capacity minus trees and
other plans, aggregator capacity minus other plans; ina_placement, inart_placement, and
direct_gradients for an equal split too wide for an LP),
held there (so trees see plans and plans see trees), and installed: for every stream
(each worker leg to its aggregator or PS, each aggregate to its PS) a flow per switch
of its path, matching the UDP port of that PS in this job, with a meter at the stream's
rate on its first switch. It is confirmed by every switch or removed whole.
"""

import itertools
import logging
import networkx as nx

from syncfabric.decisions import (direct_gradients, ina_placement, ina_problem, inart_placement,
                                  round_planner)
from syncfabric.decisions.fabric_view import available_graph
from syncfabric.decisions.gradient_plan import NO_SHARE, PlacementError, crosses
from syncfabric.decisions.ina_problem import GRID, InaProblem
from syncfabric.decisions.inart_placement import InartProblem
from syncfabric.decisions.plan_admission import plan_shares, steering_switches
from syncfabric.decisions.reservations import ReservationError
from syncfabric.errors import Conflict, InstallFailed, InvalidRequest, NotFound, NotReady
from syncfabric.openflow import steering_messages as steering
from syncfabric.services.plan_records import LivePlan, plan_hold_key, restored_plans, save_plans
from syncfabric.services.request_fields import (check_fields, check_hosts, distinct_names,
                                                job_name, positive_number)

LOG = logging.getLogger("syncfabric.ina")
REQUEST_FIELDS = {"job", "workers", "ps", "aggregators", "gradient_mb", "policy"}
POLICIES = ina_problem.POLICIES + inart_placement.POLICIES
GRADIENT_PORT_BASE = 20000          # the UDP port of a plan's PS i: see gradient_port
MAX_PSS = round_planner.MAX_PSS   # a streaming round may shard the model over every worker
MIN_THETA_MBPS = 1e-3
PLANNING_ATTEMPTS = 3


class InaPlans:
    def __init__(self, fabric, installer, store, metrics, offload):
        self.fabric, self.installer, self.store, self.metrics = fabric, installer, store, metrics
        self.offload = offload     # offload(fn, *args): fn(*args) off the event loop
        self.plans = {}            # plan id -> LivePlan
        self.release_keys = {}     # plan id -> the key that may DELETE it
        self.waiting = {}          # plan id -> until when its move waits for a switch
        self.generation = None
        self._ids = itertools.count(1)

    # --- the REST resource ------------------------------------------------------

    def list(self, _now):
        return {"plans": [self.plans[i].report for i in sorted(self.plans)]}

    def live_count(self):
        return len(self.plans)

    def show(self, plan_id, _now):
        return self._get(plan_id).report

    def owner_key(self, plan_id):
        return self.release_keys.get(self._get(plan_id).id)

    def _get(self, plan_id):
        try:
            return self.plans[int(plan_id)]
        except (ValueError, TypeError, KeyError):
            raise NotFound("no plan with id %r" % (plan_id,)) from None

    def create(self, body, release_key, now, planned=None):
        """planned: a GradientPlan the caller computed for this request on the book
        as it is (a job's round planner), held as is if it still fits."""
        request = parse_plan_request(body)
        view = self.fabric.ready()
        if self.generation != self.fabric.generation:
            raise NotReady("no fabric description loaded (PUT /fabric/topology)")
        if request["aggregators"] is None:   # every one but those that hold a PS
            request["aggregators"] = sorted(set(view.aggregators) - set(request["pss"]))
        check_hosts(view, request["workers"], request["pss"], request["aggregators"])
        book, plan_id = self.fabric.book, next(self._ids)
        result = self.plan_and_hold(view, book, request, plan_hold_key(plan_id), planned)
        live = LivePlan(plan_id, request, result, plan_report(plan_id, request, result, view), book)
        self.plans[plan_id] = live
        self.release_keys[plan_id] = release_key
        try:
            self._install(view, live)
        except (InstallFailed, NotReady):
            self.release_keys.pop(plan_id, None)
            if self.plans.pop(plan_id, None) is not None:   # else a DELETE already unbooked it
                book.release_hold(live.hold_key)
            raise
        if self.plans.get(plan_id) is not live:   # a DELETE or a fabric reload took it meanwhile
            LOG.info("plan %d released while being installed", plan_id)
            raise Conflict("plan %d was released while being installed; nothing is left of it"
                           % plan_id)
        if crosses(result, self.fabric.down_links):   # moves skip plans being installed
            self.release(plan_id, now)
            raise Conflict("a link plan %d uses went down while it was installed; nothing is "
                           "left of it; ask again" % plan_id)
        self.remember()
        log_installed(plan_id, request, result)
        return dict(live.report, release_key=release_key)

    def plan_and_hold(self, view, book, request, hold_key, planned=None):
        """Plan off the event loop on what the book leaves free (or take `planned`),
        then hold the plan's loads under hold_key if they still fit: requests admitted
        while it was computed may have taken some (then it is planned again on what is
        left). What hold_key holds already (a plan planned again) counts as free and is
        replaced. Returns the plan."""
        for attempt in range(PLANNING_ATTEMPTS):
            generation, down_links = self.fabric.generation, self.fabric.down_links
            result = (planned if attempt == 0 and planned is not None
                      and not crosses(planned, down_links)
                      else self._placement(view, book.reserved_without(hold_key), request))
            if self.fabric.generation != generation:
                raise Conflict("the fabric description changed while the plan was computed; "
                               "ask again")
            if crosses(result, self.fabric.down_links - down_links):
                LOG.info("job %r: a link the plan uses went down while it was computed; "
                         "planning again", request["job"])
                continue
            try:
                book.hold_if_free(hold_key, result.loads())
                return result
            except ReservationError as error:
                LOG.info("job %r: %s (taken while planning); planning again", request["job"],
                         error)
        raise Conflict("other requests kept taking this job's capacity, or links it would use "
                       "went down, while it was planned (%d attempts); ask again"
                       % PLANNING_ATTEMPTS)

    def _placement(self, view, reserved_mbps, request):
        """The plan on what reserved_mbps leaves free, computed off the event loop;
        InvalidRequest or Conflict if none."""
        planner, problem = placement_problem(
            available_graph(view, reserved_mbps, self.fabric.down_links), view, reserved_mbps,
            request)
        try:
            with self.metrics.planning_seconds.labels("ina").time():
                result = self.offload(planner, problem, request["policy"])
        except PlacementError as error:
            raise InvalidRequest(str(error)) from None
        if result.f < MIN_THETA_MBPS:
            raise Conflict("no capacity left for this job (theta = %.6f Mbit/s)" % result.f,
                           theta_mbps=result.f)
        return result

    def _install(self, view, live):
        """Install the plan where its streams go (every switch there connected, else
        NotReady before anything is sent) and its admission on every switch connected
        (one that is not gets it when it syncs)."""
        shares = plan_shares(view, live.request, live.result, live.report["ports"])
        connected = {switch: self.fabric.datapath_of(switch) for switch in shares}
        datapaths = dict(self.fabric.datapaths_of(steering_switches(shares)),
                         **{s: dp for s, dp in connected.items() if dp is not None})
        live.shares = shares
        try:
            self.installer.install({datapaths[switch]: steering.steering_changes(
                datapaths[switch], live.id, NO_SHARE, share)[0]
                for switch, share in shares.items() if switch in datapaths})
        except InstallFailed as failure:
            self.remove_from_switches(view, live)
            LOG.error("plan %d not installed (%s); rolled back", live.id, failure)
            raise InstallFailed("a switch rejected the plan (%s); nothing was installed"
                                % failure) from None
        live.installed = True

    def remove_from_switches(self, view, live, meters=()):
        """Delete the plan's flows on every connected switch, and its meters where it had
        them (and `meters`: {switch: stream indices} it had while it moved)."""
        removals = {}
        for switch in view.switches if view is self.fabric.view else []:
            datapath = self.fabric.datapath_of(switch)
            if datapath is not None:
                streams = set(live.shares.get(switch, NO_SHARE).meters) | set(dict(meters).get(switch, ()))
                removals[datapath] = steering.steering_removal(datapath, live.id, sorted(streams))
        if not self.installer.remove(removals):
            LOG.warning("plan %d: removal not confirmed by every switch", live.id)

    def release(self, plan_id, _now, meters=()):
        """Remove the plan (and `meters` it had while it moved) and return its capacity."""
        live = self.plans.pop(self._get(plan_id).id)   # before anything waits: one DELETE wins
        self.release_keys.pop(live.id, None)
        self.remember()
        self.remove_from_switches(live.book.view, live, meters)
        live.book.release_hold(live.hold_key)
        LOG.info("plan %d (job %r) removed", live.id, live.report["job"])
        return live.report

    # --- persistence ------------------------------------------------------------

    def remember(self):
        """Save the live plans for a restart (nothing without a state directory)."""
        save_plans(self.store, self.plans, self.release_keys)

    def _restore(self, view, book):
        """Book the plans saved before a restart in the new book; the switches get them
        as they sync."""
        for live, release_key in restored_plans(self.store, view, book):
            self.plans[live.id] = live
            self.release_keys[live.id] = release_key
            self._ids = itertools.count(max(live.id + 1, next(self._ids)))

    # --- events -----------------------------------------------------------------

    def fabric_changed(self, restored):
        """The old fabric's plans are gone with its book (the switches' reconciliation
        removes them); after a restart, the saved ones are restored into the new one."""
        for plan_id in sorted(self.plans):
            LOG.info("fabric changed: removing plan %d", plan_id)
        self.plans.clear()
        self.release_keys.clear()
        self.generation = self.fabric.generation
        if restored:
            self._restore(self.fabric.view, self.fabric.book)
        self.remember()

    def switch_share(self, switch, datapath):
        """The messages that install the switch's share of every plan (a share provider
        of the fabric's reconciliation); None until this service adopted the fabric."""
        if self.generation != self.fabric.generation:
            return None
        shares = [(live.id, live.shares.get(switch)) for live in list(self.plans.values())]
        return [message for plan_id, share in shares if share is not None
                for message in steering.steering_changes(datapath, plan_id, NO_SHARE, share)[0]]


def placement_problem(graph, view, reserved_mbps, request):
    """(planner, problem) of a request on the graph of what is free: aggregators with
    capacity left and a path to every PS; Conflict if a worker has no path to one."""
    capacities = {a: view.aggregators[a] - reserved_mbps.get(a, 0.0)
                  for a in request["aggregators"]}
    capacities = {a: c for a, c in capacities.items() if c > MIN_THETA_MBPS
                  and all(nx.has_path(graph, a, s) for s in request["pss"])}
    workers, pss = request["workers"], request["pss"]
    cut_off = [w for w in workers if not all(nx.has_path(graph, w, s) for s in pss)]
    if cut_off:
        raise Conflict("no path from %s to %s while links are down"
                       % (", ".join(cut_off), ", ".join(pss)))
    if (request["policy"] == inart_placement.EQUAL_SPLIT
            and round_planner.too_wide_for_lp(workers, pss)):
        return wide_plan, (graph, workers, pss)
    if request["policy"] in inart_placement.POLICIES:
        return inart_placement.plan, InartProblem(graph, workers, pss, capacities)
    return ina_placement.plan, InaProblem(graph, workers, pss[0], capacities)


def wide_plan(problem, _policy):
    """An equal split with more fragments than an LP plans in seconds (a job sharded
    over 100 workers): straight to the shards, as the round planner plans it
    (direct_gradients)."""
    graph, workers, pss = problem
    return direct_gradients.plan(graph, workers, pss)


def log_installed(plan_id, request, result):
    LOG.info("plan %d (job %r, %s): %d workers -> %s (split %s), theta %.3f Mbit/s (LP %.3f, "
             "rounded %.3f x%.2f, repaired %.3f), aggregators %s", plan_id, request["job"],
             result.policy, len(request["workers"]), ",".join(request["pss"]),
             ",".join("%.3f" % result.split[s] for s in request["pss"]), result.f, result.f_lp,
             result.f_rounded, result.rounded_overload, result.f_repaired,
             ",".join(sorted(result.aggregators_used())) or "none")


def gradient_port(plan_id, index):
    """The UDP port of the plan's index-th PS (ports repeat after 40000 / MAX_PSS plans)."""
    return GRADIENT_PORT_BASE + (plan_id * MAX_PSS + index) % 40000


def plan_report(plan_id, request, result, view, revision=0):
    """What a job needs to run: per worker its legs (PS, node, path, share of that PS's
    fragments, rate), every aggregate (aggregator, PS, workers, path, rate), the split,
    a UDP port per PS, and the plan's rates. One-PS plans also have `port` and
    `aggregators` (keyed by aggregator). `revision` counts the plan's moves around
    faults: a job that sees it change runs its next round on the new plan."""
    pss = request["pss"]
    gradient_mbit = request["gradient_mb"] * 8
    aggregate_rates = result.aggregate_rates()
    ports = {s: gradient_port(plan_id, i) for i, s in enumerate(pss)}
    aggregates = [{"aggregator": a, "ps": s, "workers": result.workers_at((a, s)),
                   "path": list(result.aggregate_paths[a, s]), "rate_mbps": rate}
                  for (a, s), rate in sorted(aggregate_rates.items())]
    report = {
        "id": plan_id, "revision": revision, "job": request["job"], "policy": result.policy,
        "ps": request["ps"],
        "split": result.split, "ports": ports, "gradient_mb": request["gradient_mb"],
        "theta_mbps": result.f, "theta_lp_mbps": result.f_lp,
        "theta_rounded_mbps": result.f_rounded, "rounded_overload": result.rounded_overload,
        "theta_repaired_mbps": result.f_repaired,
        "theta_bound_mbps": result.f_bound if result.f_bound is not None else result.f_lp,
        "optimality_gap": result.optimality_gap,
        "predicted_comm_time_s": gradient_mbit / result.f,
        "workers": {w: [{"ps": s, "node": option.node, "path": list(option.path), "share": share,
                         "rate_mbps": result.f * result.split[s] * share}
                        for s in pss for option, share in result.legs.get((w, s), ())]
                    for w in request["workers"]},
        "aggregates": aggregates,
        "addresses": {h: view.ip(h) for h in [*request["workers"], *pss,
                                               *sorted(result.aggregators_used())]},
    }
    if len(pss) == 1:
        report["port"] = ports[pss[0]]
        report["aggregators"] = {a["aggregator"]: {k: a[k] for k in ("workers", "path", "rate_mbps")}
                                 for a in aggregates}
    return report


def parse_plan_request(body):
    """The plan request with defaults filled in, or InvalidRequest."""
    check_fields(body, REQUEST_FIELDS, {"job", "workers", "ps", "gradient_mb"})
    request = dict({"policy": GRID, "aggregators": None}, **body)
    job_name(request)
    workers = request["workers"]
    if not distinct_names(workers):
        raise InvalidRequest("workers must be a non-empty list of distinct host names")
    if request["policy"] not in POLICIES:
        raise InvalidRequest("policy must be one of %s" % ", ".join(POLICIES))
    pss = [request["ps"]] if isinstance(request["ps"], str) else request["ps"]
    if not distinct_names(pss) or (len(pss) == 1 and set(pss) & set(workers)):
        raise InvalidRequest("ps must be a host name that is not a worker, or a list of "
                             "distinct host names (several PSs may also be workers: each "
                             "keeps its own fragment)")
    if len(pss) > MAX_PSS:
        raise InvalidRequest("at most %d PSs per job" % MAX_PSS)
    if len(pss) > 1 and request["policy"] not in inart_placement.POLICIES:
        raise InvalidRequest("policy %s plans for one PS; for several use one of %s"
                             % (request["policy"], ", ".join(inart_placement.POLICIES)))
    request["pss"] = pss
    aggregators = request["aggregators"]
    if aggregators is not None and not distinct_names(aggregators, minimum=0):
        raise InvalidRequest("aggregators must be a list of distinct host names (or omitted)")
    if not positive_number(request["gradient_mb"]):
        raise InvalidRequest("gradient_mb must be a positive number")
    return request
