"""Gradient steering to in-network aggregators as a Ryu app: GRID (Fang et al., IEEE/ACM
ToN 2023) for one PS, InArt (Liu et al., WWW 2024) for a model split over several.

    ryu-manager apps.ina_controller       # loads apps.fabric_controller too

A job asks for a plan (POST /ina/plans: workers, PS or PSs, aggregators,
gradient size, policy). The app plans on what is free (link capacity minus what
multicast trees and other plans hold; aggregator capacity minus other plans;
ina_placement.py for grid, no-ina, nearest, switchml; inart_placement.py for
inart, equal-split, lbmm, atp), books it (link loads as a hold in the multicast app's
reservation book when that app runs, so trees see plans and plans see
trees), and installs, for every stream of the plan
(each worker leg to its aggregator or the PS, each aggregate to the PS), a
flow per switch of its path matching the UDP port of the stream's PS in this
job (one port per PS) from that source to that destination, with a meter at the stream's planned rate on its first
switch. It answers once every switch confirmed with a barrier; a rejected
message removes the whole plan and books nothing. DELETE removes it all.
Workers address their aggregator (or the PS) directly; the flows choose the
path. An aggregator forwards one aggregate to the PS.

REST: POST /ina/plans, GET /ina/plans, GET/DELETE /ina/plans/<id>.
Errors: 400 malformed or invalid, 404 unknown host or plan, 409 no capacity
left for the plan, 503 fabric not ready, 500 a switch rejected the plan.
"""

import itertools
from collections import defaultdict

from ryu.app.wsgi import ControllerBase, WSGIApplication, route
from ryu.base import app_manager
from ryu.controller import ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from ryu.ofproto import ofproto_v1_3

from apps import openflow_builders as of
from apps.fabric_controller import EventFabricChanged, EventSwitchSynced
from apps import ina_placement, inart_placement
from apps.ina_placement import GRID, InaProblem, PlacementError
from apps.inart_placement import InartProblem, from_grid
from apps.multicast_trees import without_links
from apps.ofp_transactions import BarrierTracker
from apps.rest_json import (RequestError, answer, answer_release, check_fields, json_response,
                             positive_number, read_json_body, release_key_of)

CONFIRM_TIMEOUT_S = 5.0
REST_APP_KEY = "ina_controller"
REQUEST_FIELDS = {"job", "workers", "ps", "aggregators", "gradient_mb", "policy"}
POLICIES = ina_placement.POLICIES + inart_placement.POLICIES
GRADIENT_PORT_BASE = 20000          # the UDP port of a plan's PS i: see gradient_port
MAX_PSS = 8
MIN_THETA_MBPS = 1e-3
MIN_CAPACITY_MBPS = 1e-9
# ryu-manager loads these too (ryu reads the list from the module, not the class)
_REQUIRED_APP = ["apps.fabric_controller"]


class InaController(app_manager.RyuApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    _CONTEXTS = {"wsgi": WSGIApplication}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.view = None
        self.plans = {}                          # plan id -> report (with "_installed")
        self.release_keys = {}                   # plan id -> the key that may DELETE it
        self.booked_mbps = defaultdict(float)    # directed link or aggregator -> Mbit/s
        self.tracker = BarrierTracker()
        self._ids = itertools.count(1)
        kwargs["wsgi"].register(InaRestApi, {REST_APP_KEY: self})

    @property
    def fabric(self):
        return app_manager.lookup_service_brick("FabricController")

    def _link_book(self):
        """The multicast app's reservation book for this fabric, if that app runs: plans hold
        their link loads there, so trees and plans are admitted against each other."""
        multicast = app_manager.lookup_service_brick("MulticastController")
        book = getattr(multicast, "book", None)
        return book if book is not None and book.view is self.view else None

    # --- plans ------------------------------------------------------------------

    def create_plan(self, body, release_key=None):
        request = parse_plan_request(body)
        view = self.view
        if view is None or view is not self.fabric.view:
            raise RequestError(503, "no fabric description loaded (PUT /fabric/topology)")
        workers, pss = request["workers"], request["pss"]
        aggregators = request["aggregators"]
        if aggregators is None:
            aggregators = sorted(view.aggregators)
        unknown = [h for h in [*workers, *pss, *aggregators] if not view.is_host(h)]
        if unknown:
            raise RequestError(404, "unknown host(s): %s" % ", ".join(unknown))
        not_aggregators = [a for a in aggregators if not view.is_aggregator(a)]
        if not_aggregators:
            raise RequestError(400, "not aggregator host(s): %s" % ", ".join(not_aggregators))
        misplaced = [h for h in [*workers, *pss] if view.is_aggregator(h)]
        if misplaced:
            raise RequestError(400, "aggregator host(s) cannot be workers or PSs: %s"
                               % ", ".join(misplaced))
        # no yield from here to the booking: the plan is made and booked on one state
        book = self._link_book()
        graph = self._available_graph(view, book)
        capacities = {a: view.aggregators[a] - self.booked_mbps.get(a, 0.0) for a in aggregators}
        capacities = {a: c for a, c in capacities.items() if c > MIN_THETA_MBPS}
        policy = request["policy"]
        try:
            if policy in inart_placement.POLICIES:
                result = inart_placement.plan(InartProblem(graph, workers, pss, capacities), policy)
            else:
                result = from_grid(ina_placement.plan(InaProblem(graph, workers, pss[0], capacities),
                                                      policy), pss[0])
        except PlacementError as error:
            raise RequestError(400, str(error)) from None
        if result.f < MIN_THETA_MBPS:
            raise RequestError(409, "no capacity left for this job (theta = %.6f Mbit/s)"
                               % result.f, theta_mbps=result.f)
        plan_id = next(self._ids)
        report = plan_report(plan_id, request, result, view)
        self._book(report, result.loads(), book)
        self.plans[plan_id] = report
        self.release_keys[plan_id] = release_key
        try:
            self._install(view, plan_id, result)
        except RequestError:
            self.release_keys.pop(plan_id, None)
            if self.plans.pop(plan_id, None) is not None:   # else a DELETE already unbooked it
                self._unbook(report)
            raise
        self.logger.info("plan %d (job %r, %s): %d workers -> %s (split %s), theta %.3f Mbit/s "
                         "(LP %.3f, rounded %.3f x%.2f, repaired %.3f), aggregators %s", plan_id,
                         request["job"], result.policy, len(workers), ",".join(pss),
                         ",".join("%.3f" % result.split[s] for s in pss), result.f, result.f_lp,
                         result.f_rounded, result.rounded_overload, result.f_repaired,
                         ",".join(sorted(result.aggregators_used())) or "none")
        return dict(public(report), release_key=release_key)

    def _available_graph(self, view, book):
        graph = view.graph.copy()
        reserved = without_links(view, book.reserved_mbps if book is not None else {},
                                 self.fabric.down_links)
        for tail, head, data in graph.edges(data=True):
            free = (data["capacity_mbps"] - reserved.get((tail, head), 0.0)
                    - self.booked_mbps.get((tail, head), 0.0))
            data["capacity_mbps"] = max(MIN_CAPACITY_MBPS, free)   # the planner needs capacity > 0
        return graph

    def _messages(self, view, plan_id, datapath_of):
        """{datapath: [messages]} of the plan for the switches datapath_of(switch) gives a
        datapath for (it returns None to skip a switch), and {switch: [meter ids]}."""
        report = self.plans[plan_id]
        messages, meters = defaultdict(list), defaultdict(list)
        for leg_index, (source, destination, path, rate, ps) in enumerate(report["_streams"]):
            for hop, (switch, next_node) in enumerate(zip(path[1:-1], path[2:])):
                first = hop == 0
                if first:
                    meters[switch].append(of.steering_meter_id(plan_id, leg_index))
                datapath = datapath_of(switch)
                if datapath is not None:
                    messages[datapath] += of.steering_install(
                        datapath, plan_id, leg_index, view.ip(source), view.ip(destination),
                        report["ports"][ps], view.out_port(switch, next_node),
                        rate if first else None)
        return messages, meters

    def _install(self, view, plan_id, result):
        self.plans[plan_id]["_streams"] = result.streams()

        def connected(switch):
            datapath = self.fabric.datapaths.get(view.dpid(switch))
            if datapath is None:   # nothing sent yet
                raise RequestError(503, "switch %s is not connected" % switch)
            return datapath
        messages, meters = self._messages(view, plan_id, connected)
        self.plans[plan_id]["_meters"] = meters
        batch = self.tracker.send(messages)
        confirmed = batch.wait(CONFIRM_TIMEOUT_S)
        if not confirmed or batch.errors:
            self.tracker.abandon(batch)
            self._remove(view, plan_id, meters)
            reason = ("%d switch error(s), first: type=%d code=%d" % (
                len(batch.errors), batch.errors[0][1].type, batch.errors[0][1].code)
                if batch.errors else "no confirmation within %.0f s" % CONFIRM_TIMEOUT_S)
            self.logger.error("plan %d not installed (%s); rolled back", plan_id, reason)
            raise RequestError(500, "a switch rejected the plan (%s); nothing was installed" % reason)

    def _remove(self, view, plan_id, meters):
        """Delete the plan's flows on every switch and its meters where it had them."""
        removals = {}
        for switch in view.switches:
            datapath = self.fabric.datapaths.get(view.dpid(switch))
            if datapath is not None:
                removals[datapath] = of.steering_removal(datapath, plan_id, meters.get(switch, []))
        batch = self.tracker.send(removals)
        if not batch.wait(CONFIRM_TIMEOUT_S):
            self.tracker.abandon(batch)
            self.logger.warning("plan %d: removal not confirmed by every switch", plan_id)

    def _book(self, report, loads, book):
        """Links into the shared book if there is one, the rest (aggregators) here."""
        links = {r: load for r, load in loads.items() if isinstance(r, tuple)}
        own = loads if book is None else {r: load for r, load in loads.items() if r not in links}
        if book is not None:
            book.hold(("ina", report["id"]), links)
        for resource, load in own.items():
            self.booked_mbps[resource] += load
        report["_own_loads"], report["_book"] = own, book

    def _unbook(self, report):
        if report["_book"] is not None:
            report["_book"].release_hold(("ina", report["id"]))
        for resource, load in report["_own_loads"].items():
            self.booked_mbps[resource] -= load
            if self.booked_mbps[resource] <= 1e-9:
                del self.booked_mbps[resource]

    def release_plan(self, plan_id):
        report = self.plans.pop(self.get_plan(plan_id)["id"])   # before any yield: one DELETE wins
        self.release_keys.pop(report["id"], None)
        self._remove(self.view, report["id"], report.get("_meters", {}))
        self._unbook(report)
        self.logger.info("plan %d (job %r) removed", report["id"], report["job"])
        return public(report)

    def get_plan(self, plan_id):
        try:
            return self.plans[int(plan_id)]
        except (ValueError, KeyError):
            raise RequestError(404, "no plan with id %r" % (plan_id,)) from None

    # --- events -----------------------------------------------------------------

    @set_ev_cls(EventFabricChanged)
    def _fabric_changed(self, ev):
        old_view = self.view
        for plan_id in list(self.plans):
            report = self.plans.pop(plan_id)
            self.release_keys.pop(plan_id, None)
            self.logger.info("fabric changed: removing plan %d", plan_id)
            if old_view is not None:
                self._remove(old_view, plan_id, report.get("_meters", {}))
        self.booked_mbps.clear()
        self.view = ev.view

    @set_ev_cls(EventSwitchSynced)
    def _switch_synced(self, ev):
        """A switch came (back) empty: install its share of every plan."""
        if self.view is None or self.view is not self.fabric.view:
            return
        count = 0
        for plan_id in list(self.plans):
            if "_streams" not in self.plans[plan_id]:
                continue   # still being installed: its own batch reaches the switch
            messages, _meters = self._messages(
                self.view, plan_id, lambda switch: ev.datapath if switch == ev.switch else None)
            if messages:
                self.tracker.send(messages)
                count += 1
        if count:
            self.logger.info("%s: reinstalled %d plan(s)", ev.switch, count)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier_reply(self, ev):
        self.tracker.barrier_reply(ev.msg)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev):
        self.tracker.error(ev.msg)


def public(report):
    return {k: v for k, v in report.items() if not k.startswith("_")}


def gradient_port(plan_id, index):
    """The UDP port of the plan's index-th PS (ports repeat after 40000 / MAX_PSS plans)."""
    return GRADIENT_PORT_BASE + (plan_id * MAX_PSS + index) % 40000


def plan_report(plan_id, request, result, view):
    """What a job needs to run: per worker its legs (PS, node, path, share of that PS's
    fragments, rate), every aggregate (aggregator, PS, workers, path, rate), the split,
    a UDP port per PS, and the plan's rates. One-PS plans also have `port` and
    `aggregators` (keyed by aggregator)."""
    pss = request["pss"]
    gradient_mbit = request["gradient_mb"] * 8
    aggregate_rates = result.aggregate_rates()
    ports = {s: gradient_port(plan_id, i) for i, s in enumerate(pss)}
    aggregates = [{"aggregator": a, "ps": s, "workers": result.workers_at((a, s)),
                   "path": list(result.aggregate_paths[a, s]), "rate_mbps": rate}
                  for (a, s), rate in sorted(aggregate_rates.items())]
    report = {
        "id": plan_id, "job": request["job"], "policy": result.policy, "ps": request["ps"],
        "split": result.split, "ports": ports, "gradient_mb": request["gradient_mb"],
        "theta_mbps": result.f, "theta_lp_mbps": result.f_lp,
        "theta_rounded_mbps": result.f_rounded, "rounded_overload": result.rounded_overload,
        "theta_repaired_mbps": result.f_repaired,
        "predicted_comm_time_s": gradient_mbit / result.f,
        "workers": {w: [{"ps": s, "node": option.node, "path": list(option.path), "share": share,
                         "rate_mbps": result.f * result.split[s] * share}
                        for s in pss for option, share in result.legs[w, s]]
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
    """The plan request with defaults filled in, or RequestError(400)."""
    check_fields(body, REQUEST_FIELDS, {"job", "workers", "ps", "gradient_mb"})
    request = dict({"policy": GRID, "aggregators": None}, **body)
    workers = request["workers"]
    if not isinstance(request["job"], str) or not request["job"]:
        raise RequestError(400, "job must be a non-empty string")
    if (not isinstance(workers, list) or not workers
            or not all(isinstance(w, str) for w in workers) or len(set(workers)) != len(workers)):
        raise RequestError(400, "workers must be a non-empty list of distinct host names")
    if request["policy"] not in POLICIES:
        raise RequestError(400, "policy must be one of %s" % ", ".join(POLICIES))
    pss = [request["ps"]] if isinstance(request["ps"], str) else request["ps"]
    if (not isinstance(pss, list) or not pss or not all(isinstance(s, str) for s in pss)
            or len(set(pss)) != len(pss) or set(pss) & set(workers)):
        raise RequestError(400, "ps must be a host name, or a list of distinct host names, "
                                "that is not a worker")
    if len(pss) > MAX_PSS:
        raise RequestError(400, "at most %d PSs per job" % MAX_PSS)
    if len(pss) > 1 and request["policy"] not in inart_placement.POLICIES:
        raise RequestError(400, "policy %s plans for one PS; for several use one of %s"
                           % (request["policy"], ", ".join(inart_placement.POLICIES)))
    request["pss"] = pss
    aggregators = request["aggregators"]
    if aggregators is not None and (not isinstance(aggregators, list)
                                    or not all(isinstance(a, str) for a in aggregators)
                                    or len(set(aggregators)) != len(aggregators)):
        raise RequestError(400, "aggregators must be a list of distinct host names (or omitted)")
    if not positive_number(request["gradient_mb"]):
        raise RequestError(400, "gradient_mb must be a positive number")
    return request


class InaRestApi(ControllerBase):
    def __init__(self, req, link, data, **config):
        super().__init__(req, link, data, **config)
        self.ina = data[REST_APP_KEY]

    @route("ina", "/ina/plans", methods=["POST"])
    def create(self, req, **_kwargs):
        return answer(req, lambda: (self.ina.create_plan(read_json_body(req), release_key_of(req)),
                                    201))

    @route("ina", "/ina/plans", methods=["GET"])
    def list_plans(self, req, **_kwargs):
        return json_response({"plans": [public(self.ina.plans[i]) for i in sorted(self.ina.plans)]})

    @route("ina", "/ina/plans/{plan_id}", methods=["GET"])
    def show(self, req, plan_id, **_kwargs):
        return answer(req, lambda: (public(self.ina.get_plan(plan_id)), 200))

    @route("ina", "/ina/plans/{plan_id}", methods=["DELETE"])
    def delete(self, req, plan_id, **_kwargs):
        return answer_release(req, "plan", lambda: self.ina.get_plan(plan_id)["id"],
                              self.ina.release_keys, self.ina.release_plan)


if __name__ not in ("apps.ina_controller", "__main__"):   # ryu-manager apps/ina_controller.py
    from apps.launch_by_path import stand_in
    stand_in(globals())
