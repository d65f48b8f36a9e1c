"""Path-aware multicast with bandwidth reservation (ICC 2025), as a Ryu app.

    ryu-manager apps.multicast_controller       # loads apps.fabric_controller too

A PS asks for a tree (POST /multicast/trees); the app computes it on the
fabric's global view (admitted against capacity minus reservations, steered
toward links with the most headroom by measured load; multicast_trees.py), books the bandwidth (reservations.py), installs on each
tree switch a meter, a group ALL to its tree children and a flow for the
tree's address (openflow_builders.tree_install), and answers only once every
switch confirmed with a barrier. A rejected message removes everything
installed for that tree and books nothing. DELETE, or the lease running
out, removes it all and returns the bandwidth.

With a state directory (apps/state_files.py) the trees clients created are
saved after every change and restored, same ids, addresses, leases and
release keys, when a restarted controller restores the fabric; the switches
get them back as they connect. Trees of SELMCAST rounds go with their rounds.

REST: POST /multicast/trees, GET /multicast/trees, GET/DELETE /multicast/trees/<id>.
Errors: 400 malformed or invalid, 404 unknown host or tree, 409 infeasible
(with max_feasible_mbps), 503 fabric not ready, 500 a switch rejected the tree.
"""

import random
from collections import defaultdict
from dataclasses import dataclass

from ryu.app.wsgi import ControllerBase, WSGIApplication, route
from ryu.base import app_manager
from ryu.controller import ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from ryu.lib import hub
from ryu.ofproto import ofproto_v1_3

from apps import openflow_builders as of
from apps import state_files
from apps.fabric_controller import EventFabricChanged, EventLinksChanged, EventSwitchSynced
from apps.link_load import measured_mbps
from apps.multicast_trees import (PATH_AWARE, InfeasibleTree, TreeRequestError, compute_tree,
                                  forwarding_plan, repaired_tree, without_links)
from apps.ofp_transactions import BarrierTracker
from apps.rest_json import (RequestError, answer, answer_release, check_fields, json_response,
                             positive_number, read_json_body, release_key_of)
from apps.reservations import ReservationBook, ReservationError

CONFIRM_TIMEOUT_S = 5.0
LEASE_CHECK_INTERVAL_S = 0.5
REST_APP_KEY = "multicast_controller"
REQUEST_FIELDS = {"source", "receivers", "bandwidth_mbps", "policy", "ttl_s"}
# ryu-manager loads these too (ryu reads the list from the module, not the class)
_REQUIRED_APP = ["apps.fabric_controller"]


@dataclass(frozen=True)
class TreeSpec:
    """One tree to create: what compute_tree needs."""
    source: str
    receivers: list
    bandwidth_mbps: float
    policy: str = PATH_AWARE


class MulticastController(app_manager.RyuApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    _CONTEXTS = {"wsgi": WSGIApplication}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.book = None
        self.release_keys = {}   # tree id -> the key that may DELETE it (None: nobody)
        self.tracker = BarrierTracker()
        self.rng = random.Random()
        kwargs["wsgi"].register(MulticastRestApi, {REST_APP_KEY: self})
        self.lease_thread = hub.spawn(self._expire_leases)
        self.links_changed = hub.Event()
        self.reroute_thread = hub.spawn(self._reroute_trees)

    @property
    def fabric(self):
        return app_manager.lookup_service_brick("FabricController")

    # --- trees ----------------------------------------------------------------

    def create_tree(self, request, release_key=None):
        """Validate, compute, reserve, install; returns the tree's report or raises
        RequestError. The tree belongs to release_key (rest_json)."""
        source, receivers, demand, policy, ttl_s = parse_tree_request(request)
        (reservation,) = self.create_trees([TreeSpec(source, receivers, demand, policy)], ttl_s,
                                           release_key)
        return dict(self.tree_report(reservation), release_key=release_key)

    def ready_view(self):
        """The fabric view trees are booked on; RequestError(503) if no fabric is loaded."""
        if self.book is None or self.book.view is not self.fabric.view:
            raise RequestError(503, "no fabric description loaded (PUT /fabric/topology)")
        return self.book.view

    def create_trees(self, specs, ttl_s=None, release_key=None):
        """Compute, book and install several trees as one (each computed on what the
        ones before it booked): every tree is installed and confirmed, or nothing is
        booked or left on a switch. Returns their Reservations or raises RequestError."""
        view = self.ready_view()
        hosts = dict.fromkeys(h for spec in specs for h in [spec.source, *spec.receivers])
        unknown = [h for h in hosts if not view.is_host(h)]
        if unknown:
            raise RequestError(404, "unknown host(s): %s" % ", ".join(unknown))
        reservations, plans = [], []
        load = measured_mbps(view, self.fabric.rates)
        try:  # no yield in here: the trees are computed and booked against one state
            for spec in specs:
                tree = compute_tree(view, spec.source, spec.receivers, spec.bandwidth_mbps,
                                    without_links(view, self.book.reserved_mbps,
                                                  self.fabric.down_links), spec.policy, self.rng,
                                    load_mbps=load)
                plans.append(forwarding_plan(view, tree))
                reservations.append(self.book.reserve(tree, ttl_s))
                self.release_keys[reservations[-1].tree_id] = release_key
            datapaths = self._datapaths_for(view, [step for plan in plans for step in plan])
        except (TreeRequestError, InfeasibleTree, ReservationError, RequestError) as error:
            for reservation in reservations:
                self.book.release(reservation.tree_id)
                self.release_keys.pop(reservation.tree_id, None)
            prefix = "tree from %s: " % spec.source if len(specs) > 1 else ""
            if isinstance(error, TreeRequestError):
                raise RequestError(400, prefix + str(error)) from None
            if isinstance(error, InfeasibleTree):
                raise RequestError(409, prefix + str(error),
                                   max_feasible_mbps=error.max_feasible_mbps) from None
            if isinstance(error, ReservationError):
                raise RequestError(409, prefix + str(error)) from None
            raise
        messages = defaultdict(list)
        for reservation, plan in zip(reservations, plans):
            for switch, in_port, out_ports in plan:
                datapath = datapaths[switch]
                messages[datapath] += of.tree_install(datapath, reservation.tree_id,
                                                      reservation.address, in_port, out_ports,
                                                      reservation.tree.bandwidth_mbps)
        book = self.book
        batch = self.tracker.send(messages)
        confirmed = batch.wait(CONFIRM_TIMEOUT_S)
        ids = ",".join(str(r.tree_id) for r in reservations)
        released = [r.tree_id for r in reservations if self.book is not book
                    or r.tree_id not in book.ids()]
        if released:   # a DELETE or a fabric reload took some while they were installed
            self.tracker.abandon(batch)
            for reservation in reservations:
                self._release_if_booked(reservation.tree_id, book)
            self.logger.info("tree(s) %s released while being installed", ids)
            raise RequestError(409, "tree(s) %s were released while being installed; nothing "
                                    "is left of them" % ",".join(map(str, released)))
        if not confirmed or batch.errors:
            self.tracker.abandon(batch)
            for reservation in reservations:
                self._release_if_booked(reservation.tree_id, book)
            reason = ("%d switch error(s), first: type=%d code=%d" % (
                len(batch.errors), batch.errors[0][1].type, batch.errors[0][1].code)
                if batch.errors else "no confirmation within %.0f s" % CONFIRM_TIMEOUT_S)
            self.logger.error("tree(s) %s not installed (%s); rolled back", ids, reason)
            raise RequestError(500, "a switch rejected the tree (%s); nothing was installed" % reason)
        for reservation, plan in zip(reservations, plans):
            tree = reservation.tree
            self.logger.info("tree %d: %s -> %d receivers at %.3f Mbit/s via %s, policy %s, "
                             "address %s", reservation.tree_id, tree.source, len(tree.receivers),
                             tree.bandwidth_mbps, ",".join(s for s, _, _ in plan), tree.policy,
                             reservation.address)
        self._remember()
        return reservations

    def _datapaths_for(self, view, plan):
        datapaths, missing = {}, []
        for switch, _in_port, _out_ports in plan:
            datapath = self.fabric.datapaths.get(view.dpid(switch))
            if datapath is None and switch not in missing:
                missing.append(switch)
            datapaths[switch] = datapath
        if missing:
            raise RequestError(503, "switch(es) not connected: %s" % ", ".join(missing))
        return datapaths

    def release_tree(self, tree_id, book=None):
        """Remove the tree's flows, groups and meters and return its bandwidth; RequestError
        404 if unknown. The tree leaves the book before the first yield, so of concurrent
        releases (DELETEs, the lease) exactly one wins and the others get 404. book: the
        one the tree is in (default: the current one; an old one after a fabric change)."""
        book = book or self.book   # and its fabric, even if the current one changes meanwhile
        try:
            reservation = book.release(tree_id)
        except (ReservationError, AttributeError):
            raise RequestError(404, "no tree with id %r" % (tree_id,)) from None
        if book is self.book:   # else the key belongs to the new book's tree of that id
            self.release_keys.pop(tree_id, None)
            self._remember()
        view = book.view
        removals = {}
        for switch, _in_port, _out_ports in forwarding_plan(view, reservation.tree):
            datapath = self.fabric.datapaths.get(view.dpid(switch))
            if datapath is not None:
                removals[datapath] = of.tree_removal(datapath, tree_id)
        batch = self.tracker.send(removals)
        if not batch.wait(CONFIRM_TIMEOUT_S):
            self.tracker.abandon(batch)
            self.logger.warning("tree %d: removal not confirmed by every switch", tree_id)
        self.logger.info("tree %d released (%.3f Mbit/s returned)", tree_id,
                         reservation.tree.bandwidth_mbps)
        return reservation

    def _remember(self):
        """Save the trees clients own, for a restart (nothing without a state directory)."""
        if self.book is not None:
            state_files.save("multicast", {"trees": [
                dict(self.book.record(r.tree_id), release_key=self.release_keys[r.tree_id])
                for r in self.book if self.release_keys.get(r.tree_id)]})

    def _restore_trees(self):
        for record in (state_files.load("multicast") or {}).get("trees", []):
            try:
                reservation = self.book.restore(record)
            except ReservationError as error:
                self.logger.error("saved tree %s not restored: %s", record.get("id"), error)
                continue
            self.release_keys[reservation.tree_id] = record.get("release_key")
            self.logger.info("tree %d restored: %s -> %d receivers at %.3f Mbit/s, address %s",
                             reservation.tree_id, reservation.tree.source,
                             len(reservation.tree.receivers), reservation.tree.bandwidth_mbps,
                             reservation.address)

    def _release_if_booked(self, tree_id, book=None):
        """Release a tree unless a concurrent DELETE already did."""
        try:
            self.release_tree(tree_id, book)
        except RequestError:
            pass

    def tree_report(self, reservation, released=False):
        tree = reservation.tree
        expires_in = (None if reservation.expires_at is None or released
                      else max(0.0, reservation.expires_at - self.book.clock()))
        return {"id": reservation.tree_id, "address": reservation.address, "source": tree.source,
                "receivers": list(tree.receivers), "policy": tree.policy,
                "bandwidth_mbps": tree.bandwidth_mbps,
                "edges": [list(edge) for edge in tree.edges],
                "reservation": {"bandwidth_mbps": tree.bandwidth_mbps, "links": len(tree.edges),
                                "expires_in_s": expires_in}}

    def _expire_leases(self):
        while True:
            hub.sleep(LEASE_CHECK_INTERVAL_S)
            try:
                for tree_id in self.book.expired() if self.book is not None else []:
                    self.logger.info("tree %d: lease expired", tree_id)
                    try:
                        self.release_tree(tree_id)
                    except RequestError:
                        pass  # released meanwhile by a DELETE
            except Exception:   # a background thread logs and keeps going
                self.logger.exception("lease check failed; retrying")

    # --- events ---------------------------------------------------------------

    @set_ev_cls(EventFabricChanged)
    def _fabric_changed(self, ev):
        old, self.book = self.book, ReservationBook(ev.view)   # new requests see the new fabric
        self.release_keys = {}
        if ev.restored:
            self._restore_trees()
        self._remember()
        for reservation in list(old or []):
            self.logger.info("fabric changed: releasing tree %d", reservation.tree_id)
            self._release_if_booked(reservation.tree_id, old)

    @set_ev_cls(EventLinksChanged)
    def _links_changed(self, ev):
        # rerouting waits for barrier replies, which reach this app as events: not here
        self.links_changed.set()

    def _reroute_trees(self):
        """Thread: after links changed, move every live tree that uses a link that is down
        onto the rest of the fabric. Which links are down is read afresh for each tree:
        they change while trees are moved (e.g. switches connecting one by one)."""
        while True:
            self.links_changed.wait()
            self.links_changed.clear()
            try:
                if self.book is None or self.book.view is not self.fabric.view:
                    continue
                for tree_id in sorted(self.book.ids()):
                    down_links = self.fabric.down_links
                    try:
                        edges = self.book.get(tree_id).tree.edges
                    except ReservationError:
                        continue   # released meanwhile
                    if any(frozenset(edge) in down_links for edge in edges):
                        self._reroute(tree_id, down_links)
            except Exception:   # a background thread logs and keeps going
                self.logger.exception("rerouting trees failed")

    def _reroute(self, tree_id, down_links):
        """Make-before-break: compute the tree again without the down links (its own
        bandwidth counted free), install the new switch state and confirm it, then
        remove what only the old tree had, and rebook. If no tree fits, release it."""
        book, view = self.book, self.book.view
        try:
            old = book.get(tree_id)
        except ReservationError:
            return   # released meanwhile
        try:
            tree = repaired_tree(view, old.tree, book.reserved_mbps, down_links, self.rng)
            datapaths = self._datapaths_for(view, forwarding_plan(view, tree))
        except (InfeasibleTree, RequestError) as error:
            # a switch away or still connecting (restarting, or a restarted controller):
            # it gets the tree when it has synced. Synced, not connected: down links count
            # a connected switch as gone until then
            away = [s for s, _, _ in forwarding_plan(view, old.tree)
                    if view.dpid(s) not in self.fabric.synced_dpids]
            if away:
                self.logger.warning("tree %d: no way around %s, not synced (%s); kept for "
                                    "when it is", tree_id, ",".join(away), error)
                return
            self.logger.warning("tree %d crosses a failed link and no other tree fits (%s): "
                                "releasing it", tree_id, error)
            self._release_if_booked(tree_id, book)
            return
        # the links only the new tree uses are held while it is installed: requests
        # admitted meanwhile see them taken
        hold = ("reroute", tree_id)
        book.hold(hold, {edge: tree.bandwidth_mbps for edge in set(tree.edges) - set(old.tree.edges)})
        try:
            self._move_tree(book, view, old, tree, datapaths)
        finally:
            book.release_hold(hold)

    def _move_tree(self, book, view, old, tree, datapaths):
        """Install `tree` where `old` was (same id and address), confirm, rebook, then
        remove what only the old one had; release it if the switches refuse."""
        tree_id = old.tree_id
        old_plan = {switch: in_port for switch, in_port, _ in forwarding_plan(view, old.tree)}
        new_plan = forwarding_plan(view, tree)
        messages = defaultdict(list)
        for switch, in_port, out_ports in new_plan:
            datapath = datapaths[switch]
            if switch in old_plan:
                messages[datapath] += of.tree_update(datapath, tree_id, old.address, in_port,
                                                     out_ports, old_plan[switch])
            else:
                messages[datapath] += of.tree_install(datapath, tree_id, old.address, in_port,
                                                      out_ports, tree.bandwidth_mbps)
        batch = self.tracker.send(messages)
        if not batch.wait(CONFIRM_TIMEOUT_S) or batch.errors:
            self.tracker.abandon(batch)
            self.logger.error("tree %d: the new tree was not confirmed; releasing it", tree_id)
            self._release_if_booked(tree_id, book)
            return
        if self.book is not book or tree_id not in book.ids():   # released meanwhile
            for switch in {s for s, _, _ in new_plan} - set(old_plan):
                self.tracker.send({datapaths[switch]: of.tree_removal(datapaths[switch], tree_id)})
            return
        book.replace(tree_id, tree)
        self._remember()
        new_in_port = {switch: in_port for switch, in_port, _ in new_plan}
        removals = {}
        for switch, in_port in old_plan.items():
            datapath = self.fabric.datapaths.get(view.dpid(switch))
            if datapath is None:
                continue
            if switch not in new_in_port:
                removals[datapath] = of.tree_removal(datapath, tree_id)
            elif new_in_port[switch] != in_port:
                removals[datapath] = [of.tree_flow_removal(datapath, tree_id, old.address, in_port)]
        self.tracker.send(removals)
        self.logger.info("tree %d rerouted around failed link(s): now via %s", tree_id,
                         ",".join(s for s, _, _ in new_plan))

    @set_ev_cls(EventSwitchSynced)
    def _switch_synced(self, ev):
        """A switch came (back) empty: install its share of every live tree."""
        if self.book is None or self.book.view is not self.fabric.view:
            return
        messages = []
        for reservation in self.book:
            for switch, in_port, out_ports in forwarding_plan(self.book.view, reservation.tree):
                if switch == ev.switch:
                    messages += of.tree_install(ev.datapath, reservation.tree_id,
                                                reservation.address, in_port, out_ports,
                                                reservation.tree.bandwidth_mbps)
        if messages:
            self.tracker.send({ev.datapath: messages})
            self.logger.info("%s: reinstalled %d tree(s)", ev.switch, len(messages) // 3)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier_reply(self, ev):
        self.tracker.barrier_reply(ev.msg)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev):
        self.tracker.error(ev.msg)


def parse_tree_request(request):
    """(source, receivers, bandwidth_mbps, policy, ttl_s) from a POST body, or RequestError(400)."""
    check_fields(request, REQUEST_FIELDS, {"source", "receivers", "bandwidth_mbps"})
    source, receivers = request["source"], request["receivers"]
    if not isinstance(source, str):
        raise RequestError(400, "source must be a host name")
    if not isinstance(receivers, list) or not all(isinstance(r, str) for r in receivers):
        raise RequestError(400, "receivers must be a list of host names")
    ttl_s = request.get("ttl_s")
    if ttl_s is not None and not positive_number(ttl_s):
        raise RequestError(400, "ttl_s must be a positive number of seconds or null")
    return source, receivers, request["bandwidth_mbps"], request.get("policy", PATH_AWARE), ttl_s


class MulticastRestApi(ControllerBase):
    def __init__(self, req, link, data, **config):
        super().__init__(req, link, data, **config)
        self.multicast = data[REST_APP_KEY]

    @route("multicast", "/multicast/trees", methods=["POST"])
    def create(self, req, **_kwargs):
        return answer(req, lambda: (self.multicast.create_tree(read_json_body(req),
                                                               release_key_of(req)), 201))

    @route("multicast", "/multicast/trees", methods=["GET"])
    def list_trees(self, req, **_kwargs):
        book = self.multicast.book
        return json_response({"trees": [self.multicast.tree_report(r) for r in book or []]})

    @route("multicast", "/multicast/trees/{tree_id}", methods=["GET"])
    def show(self, req, tree_id, **_kwargs):
        return answer(req, lambda: (self.multicast.tree_report(self._reservation(tree_id)), 200))

    @route("multicast", "/multicast/trees/{tree_id}", methods=["DELETE"])
    def delete(self, req, tree_id, **_kwargs):
        multicast = self.multicast
        return answer_release(req, "tree", lambda: self._reservation(tree_id).tree_id,
                              multicast.release_keys, lambda number: multicast.tree_report(
                                  multicast.release_tree(number), released=True))

    def _reservation(self, tree_id):
        try:
            return self.multicast.book.get(int(tree_id))
        except (ValueError, ReservationError, AttributeError):
            raise RequestError(404, "no tree with id %r" % tree_id) from None



if __name__ not in ("apps.multicast_controller", "__main__"):   # ryu-manager apps/multicast_controller.py
    from apps.launch_by_path import stand_in
    stand_in(globals())
