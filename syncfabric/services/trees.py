"""The multicast trees service (no Ryu): path-aware trees with reserved bandwidth (ICC 2025).

A tree is computed on the fabric's view (multicast_trees), booked in the fabric's book,
installed through the installer and confirmed by every switch, or nothing of it is
booked or left on a switch. Release, leases, reinstall on a switch that came back empty,
and the trees saved for a restart live here too (reroutes: tree_moves). Time comes
in as `now`.
"""

import logging
import random
from collections import defaultdict
from dataclasses import dataclass

from syncfabric.decisions.multicast_trees import (PATH_AWARE, InfeasibleTree, TreeRequestError,
                                                  compute_tree, switch_shares, with_backup_uplinks,
                                                  without_links)
from syncfabric.decisions.reservations import ReservationError
from syncfabric.errors import Conflict, InstallFailed, InvalidRequest, NotFound, NotReady
from syncfabric.openflow.tree_messages import tree_changes
from syncfabric.services.request_fields import check_fields, positive_number
from syncfabric.services.tree_records import restored_trees, save_trees

LOG = logging.getLogger("syncfabric.multicast")
REQUEST_FIELDS = {"source", "receivers", "bandwidth_mbps", "policy", "ttl_s"}


@dataclass(frozen=True)
class TreeSpec:
    """One tree to create: what compute_tree needs."""
    source: str
    receivers: list
    bandwidth_mbps: float
    policy: str = PATH_AWARE
    tree: object = None   # a MulticastTree a planner computed on the book, to book as is


def parse_tree_request(body):
    """(TreeSpec, ttl_s) from a POST body, or InvalidRequest."""
    check_fields(body, REQUEST_FIELDS, {"source", "receivers", "bandwidth_mbps"})
    source, receivers = body["source"], body["receivers"]
    if not isinstance(source, str):
        raise InvalidRequest("source must be a host name")
    if not isinstance(receivers, list) or not all(isinstance(r, str) for r in receivers):
        raise InvalidRequest("receivers must be a list of host names")
    ttl_s = body.get("ttl_s")
    if ttl_s is not None and not positive_number(ttl_s):
        raise InvalidRequest("ttl_s must be a positive number of seconds or null")
    return TreeSpec(source, receivers, body["bandwidth_mbps"], body.get("policy", PATH_AWARE)), ttl_s


def tree_report(reservation, now, released=False):
    tree = reservation.tree
    expires_in = (None if reservation.expires_at is None or released
                  else max(0.0, reservation.expires_at - now))
    return {"id": reservation.tree_id, "address": reservation.address, "source": tree.source,
            "receivers": list(tree.receivers), "policy": tree.policy,
            "bandwidth_mbps": tree.bandwidth_mbps, "edges": [list(edge) for edge in tree.edges],
            "backup_uplinks": [list(backup) for backup in tree.backups],
            "reservation": {"bandwidth_mbps": tree.bandwidth_mbps, "links": len(tree.edges),
                            "expires_in_s": expires_in}}


class MulticastTrees:
    """local_repair: give each tree backup uplinks that its ingress switch fails over to
    by itself (FAST_FAILOVER groups), ahead of the make-before-break move."""

    def __init__(self, fabric, installer, store, metrics, rng=None, local_repair=True):
        self.fabric, self.installer, self.store, self.metrics = fabric, installer, store, metrics
        self.rng = rng or random.Random()
        self.local_repair = local_repair
        self.book = None           # the fabric's book when this service last adopted it
        self.generation = None
        self.release_keys = {}     # tree id -> the key that may DELETE it (None: nobody)
        self.moving = set()        # trees whose move is installed but not yet booked

    # --- the REST resource ------------------------------------------------------

    def create(self, body, release_key, now):
        spec, ttl_s = parse_tree_request(body)
        (reservation,) = self.create_trees([spec], ttl_s, release_key, now)
        return dict(tree_report(reservation, now), release_key=release_key)

    def list(self, now):
        return {"trees": [tree_report(r, now) for r in self.book or []]}

    def live_count(self):
        return len(self.book or [])

    def show(self, tree_id, now):
        return tree_report(self._get(tree_id), now)

    def owner_key(self, tree_id):
        return self.release_keys.get(self._get(tree_id).tree_id)

    def release(self, tree_id, now):
        return tree_report(self.release_tree(self._get(tree_id).tree_id, now), now, released=True)

    def _get(self, tree_id):
        try:
            return self.book.get(int(tree_id))
        except (ValueError, TypeError, ReservationError, AttributeError):
            raise NotFound("no tree with id %r" % (tree_id,)) from None

    # --- trees ------------------------------------------------------------------

    def ready_book(self):
        """The book trees are booked in; NotReady until this service adopted the
        fabric's current one."""
        self.fabric.ready()
        if self.book is None or self.generation != self.fabric.generation:
            raise NotReady("no fabric description loaded (PUT /fabric/topology)")
        return self.book

    def create_trees(self, specs, ttl_s, release_key, now):
        """Compute, book and install several trees as one (each computed on what the ones
        before it booked): every tree is confirmed, or nothing is booked or left on a
        switch. Returns their Reservations."""
        book = self.ready_book()
        view = book.view
        unknown = [h for h in dict.fromkeys(h for s in specs for h in [s.source, *s.receivers])
                   if not view.is_host(h)]
        if unknown:
            raise NotFound("unknown host(s): %s" % ", ".join(unknown))
        reservations, plans = [], []
        load = self.fabric.measured_mbps()
        try:   # computed and booked against one state: nothing here waits
            for spec in specs:
                with self.metrics.planning_seconds.labels("tree").time():
                    tree = self.backed_up(view, spec.tree or compute_tree(
                        view, spec.source, spec.receivers, spec.bandwidth_mbps,
                        without_links(view, book.reserved_mbps, self.fabric.down_links),
                        spec.policy, self.rng, load_mbps=load), book.reserved_mbps)
                plans.append(switch_shares(view, tree))
                reservations.append(book.reserve(tree, now, ttl_s))
                self.release_keys[reservations[-1].tree_id] = release_key
            datapaths = self.fabric.datapaths_of([switch for plan in plans for switch in plan])
        except (TreeRequestError, InfeasibleTree, ReservationError, NotReady) as error:
            for reservation in reservations:
                book.release(reservation.tree_id)
                self.release_keys.pop(reservation.tree_id, None)
            raise _refusal(error, "tree from %s: " % spec.source if len(specs) > 1 else "") from None
        messages = defaultdict(list)
        for reservation, plan in zip(reservations, plans):
            for switch, share in plan.items():
                messages[datapaths[switch]] += installing(datapaths[switch], reservation, share)
        ids = ",".join(str(r.tree_id) for r in reservations)
        failure = None
        try:
            self.installer.install(messages)
        except InstallFailed as error:
            failure = error
        released = [r.tree_id for r in reservations
                    if self.book is not book or r.tree_id not in book.ids()]
        if released or failure:
            for reservation in reservations:
                self.release_if_booked(reservation.tree_id, now, book)
        if released:   # a DELETE or a fabric reload took some while they were installed
            LOG.info("tree(s) %s released while being installed", ids)
            raise Conflict("tree(s) %s were released while being installed; nothing is left "
                           "of them" % ",".join(map(str, released)))
        if failure:
            LOG.error("tree(s) %s not installed (%s); rolled back", ids, failure)
            raise InstallFailed("a switch rejected the tree (%s); nothing was installed" % failure)
        for reservation, plan in zip(reservations, plans):
            log_installed(reservation, plan)
        self.remember(now)
        return reservations

    def release_tree(self, tree_id, now, book=None):
        """Remove the tree's flows, groups and meters and return its bandwidth; NotFound if
        unknown. The tree leaves the book before anything waits, so of concurrent
        releases (DELETEs, the lease) exactly one wins. book: the one the tree is in
        (default: the current one; an old one after a fabric change)."""
        book = book or self.book
        try:
            reservation = book.release(tree_id)
        except (ReservationError, AttributeError):
            raise NotFound("no tree with id %r" % (tree_id,)) from None
        if book is self.book:   # else the key belongs to the new book's tree of that id
            self.release_keys.pop(tree_id, None)
            self.remember(now)
        view = book.view
        removals = {}
        for switch, share in switch_shares(view, reservation.tree).items():
            datapath = self.connected(view, switch)
            if datapath is not None:
                removals[datapath] = tree_changes(datapath, tree_id, reservation.address,
                                                  share, None)[1]
        if not self.installer.remove(removals):
            LOG.warning("tree %d: removal not confirmed by every switch", tree_id)
        LOG.info("tree %d released (%.3f Mbit/s returned)", tree_id, reservation.tree.bandwidth_mbps)
        return reservation

    def backed_up(self, view, tree, reserved_mbps):
        """`tree` with backup uplinks for local repair, if this service gives them."""
        if not self.local_repair:
            return tree
        return with_backup_uplinks(view, tree, reserved_mbps, self.fabric.down_links)

    def connected(self, view, switch):
        """The switch's datapath if it is connected to this fabric generation's view."""
        return self.fabric.datapath_of(switch) if view is self.fabric.view else None

    def release_if_booked(self, tree_id, now, book=None):
        """Release a tree unless a concurrent DELETE already did."""
        try:
            self.release_tree(tree_id, now, book)
        except NotFound:
            pass

    # --- persistence ------------------------------------------------------------

    def remember(self, now):
        """Save the live trees, clients' and SELMCAST rounds' (which have no release key),
        for a restart (nothing without a state directory)."""
        if self.book is not None:
            save_trees(self.store, self.book, self.release_keys, now)

    # --- events and timers ----------------------------------------------------------

    def fabric_changed(self, restored, now):
        """Adopt the fabric's new book (restoring the saved trees into it after a
        restart) and remove every tree of the old one."""
        old = self.book
        self.book, self.generation = self.fabric.book, self.fabric.generation
        self.release_keys = {}
        if restored:
            self.release_keys = restored_trees(self.store, self.book, now)
        self.remember(now)
        for reservation in list(old or []):
            LOG.info("fabric changed: releasing tree %d", reservation.tree_id)
            self.release_if_booked(reservation.tree_id, now, old)

    def expire_leases(self, now):
        for tree_id in self.book.expired(now) if self.book is not None else []:
            LOG.info("tree %d: lease expired", tree_id)
            self.metrics.releases.labels("trees", "lease").inc()
            self.release_if_booked(tree_id, now)

    def switch_share(self, switch, datapath):
        """The messages that install the switch's share of every live tree (a share
        provider of the fabric's reconciliation); None until this service adopted the
        fabric's current book, or while a tree moves (the book still holds the old
        tree: the switch is read again once the move is booked)."""
        if self.book is None or self.generation != self.fabric.generation or self.moving:
            return None
        shares = [(r, switch_shares(self.book.view, r.tree).get(switch)) for r in self.book]
        return [m for r, share in shares if share is not None for m in installing(datapath, r, share)]


def installing(datapath, reservation, share):
    """The messages that install a tree's share on one switch."""
    return tree_changes(datapath, reservation.tree_id, reservation.address, None, share)[0]


def log_installed(reservation, shares):
    tree = reservation.tree
    LOG.info("tree %d: %s -> %d receivers at %.3f Mbit/s via %s, policy %s, address %s",
             reservation.tree_id, tree.source, len(tree.receivers), tree.bandwidth_mbps,
             ",".join(shares), tree.policy, reservation.address)


def _refusal(error, prefix):
    """The service error for what compute_tree or the book refused."""
    if isinstance(error, TreeRequestError):
        return InvalidRequest(prefix + str(error))
    if isinstance(error, InfeasibleTree):
        return Conflict(prefix + str(error), max_feasible_mbps=error.max_feasible_mbps)
    if isinstance(error, ReservationError):
        return Conflict(prefix + str(error))
    return error
