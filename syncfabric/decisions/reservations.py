"""Bandwidth reservations for multicast trees: per-link accounting, addresses, leases.

Reserving is all-or-nothing: every edge of the tree must still have the
demand free against capacity minus what other trees hold, or nothing is
booked. Each reservation gets an id (never reused, so it can name groups and
meters on the switches), a multicast address from the pool, and optionally a
lease after which it is due for release.
"""

import ipaddress
import itertools
from collections import defaultdict
from dataclasses import dataclass
from typing import Optional

from syncfabric.decisions.multicast_trees import (CAPACITY_TOLERANCE_MBPS, MulticastTree,
                                                  backup_links, fits_in)

DEFAULT_ADDRESS_POOL = "239.1.0.0/16"


def with_trees(loads_mbps, trees):
    """{link or aggregator: Mbit/s}: `loads_mbps` with each tree's bandwidth added on
    every edge of it (a job's gradient plan and its return trees, together)."""
    loads = dict(loads_mbps)
    for tree in trees:
        for edge in tree.edges:
            loads[edge] = loads.get(edge, 0.0) + tree.bandwidth_mbps
    return loads


class ReservationError(Exception):
    """A reservation that cannot be made (no capacity, no address) or found."""


@dataclass(frozen=True)
class Reservation:
    tree_id: int
    address: str
    tree: MulticastTree
    created_at: float
    expires_at: Optional[float]


class ReservationBook:
    """The fabric's one book of reservations (services call it `book`): the trees, plans
    and jobs held on every link and aggregator of a view, each admitted only if it fits."""

    def __init__(self, view, address_pool=DEFAULT_ADDRESS_POOL):
        self.view = view
        self._addresses = [str(a) for a in ipaddress.ip_network(address_pool).hosts()]
        self._ids = itertools.count(1)
        self._by_id = {}
        self._holds = {}
        self.credits = {}   # key -> {resource: Mbit/s} booked twice, used once (credit)
        self.reserved_mbps = defaultdict(float)   # trees and holds, less the credits

    def __len__(self):
        return len(self._by_id)

    def __iter__(self):
        return iter(sorted(self._by_id.values(), key=lambda r: r.tree_id))

    def ids(self):
        return set(self._by_id)

    def get(self, tree_id):
        try:
            return self._by_id[tree_id]
        except KeyError:
            raise ReservationError("no tree with id %r" % (tree_id,)) from None

    def reserve(self, tree, now=0.0, ttl_s=None):
        """Book tree.bandwidth_mbps on every edge of `tree` at time `now` (its lease, if
        any, runs out at now + ttl_s); returns the Reservation."""
        self._check_free(tree)
        in_use = {r.address for r in self._by_id.values()}
        address = next((a for a in self._addresses if a not in in_use), None)
        if address is None:
            raise ReservationError("the multicast address pool is exhausted")
        reservation = Reservation(next(self._ids), address, tree, now,
                                  None if ttl_s is None else now + ttl_s)
        self._book(reservation)
        return reservation

    def _check_free(self, tree):
        for edge in tree.edges:
            capacity = self.view.graph.edges[edge]["capacity_mbps"]
            free = capacity - self.reserved_mbps.get(edge, 0.0)
            if not fits_in(free, tree.bandwidth_mbps, capacity):
                raise ReservationError("link %s->%s has only %.3f Mbit/s unreserved" % (*edge, free))

    def _book(self, reservation):
        self._by_id[reservation.tree_id] = reservation
        for edge in reservation.tree.edges:
            self.reserved_mbps[edge] += reservation.tree.bandwidth_mbps

    def record(self, tree_id, now):
        """The reservation as JSON-able data that restore() takes back, e.g. in a new
        process: its lease as seconds left at `now`, since clocks do not survive a restart."""
        reservation = self.get(tree_id)
        tree = reservation.tree
        return {"id": tree_id, "address": reservation.address, "source": tree.source,
                "receivers": list(tree.receivers), "edges": [list(e) for e in tree.edges],
                "bandwidth_mbps": tree.bandwidth_mbps, "policy": tree.policy,
                "backup_uplinks": [list(backup) for backup in tree.backups],
                "expires_in_s": None if reservation.expires_at is None
                else reservation.expires_at - now}

    def restore(self, record, now):
        """Book a reservation record() made, with its id and address; ReservationError
        if it no longer fits this fabric (unknown links, capacity, id or address taken).
        Later ids follow it, so ids stay unique."""
        try:
            tree = MulticastTree(record["source"], tuple(record["receivers"]),
                                 tuple(tuple(edge) for edge in record["edges"]),
                                 float(record["bandwidth_mbps"]), record["policy"],
                                 tuple(tuple(backup) for backup in record.get("backup_uplinks", [])))
            missing = [edge for edge in list(tree.edges) + backup_links(tree)
                       if not self.view.graph.has_edge(*edge)]
            tree_id, address = int(record["id"]), record["address"]
        except (KeyError, TypeError, ValueError) as error:
            raise ReservationError("not a reservation record: %r" % (error,)) from None
        if missing:
            raise ReservationError("links not in this fabric: %s" % missing)
        if tree_id in self._by_id or address in {r.address for r in self._by_id.values()}:
            raise ReservationError("id %d or address %s already booked" % (tree_id, address))
        self._check_free(tree)
        ttl_s = record.get("expires_in_s")
        self._book(Reservation(tree_id, address, tree, now, None if ttl_s is None else now + ttl_s))
        self._ids = itertools.count(max(tree_id + 1, next(self._ids)))
        return self._by_id[tree_id]

    def release(self, tree_id):
        """Return the tree's bandwidth and address; returns the released Reservation."""
        reservation = self.get(tree_id)
        del self._by_id[tree_id]
        for edge in reservation.tree.edges:
            self._unbook(edge, reservation.tree.bandwidth_mbps)
        return reservation

    def replace(self, tree_id, tree):
        """Move a reservation to another tree (same id, address and lease), e.g. around a
        failed link; no capacity check here (the tree was computed on what is free)."""
        old = self.get(tree_id)
        for edge in old.tree.edges:
            self._unbook(edge, old.tree.bandwidth_mbps)
        self._book(Reservation(tree_id, old.address, tree, old.created_at, old.expires_at))
        return self._by_id[tree_id]

    def hold(self, key, loads_mbps):
        """Book other load, e.g. an INA plan's: {(tail, head) link or aggregator host:
        Mbit/s}. Trees are then admitted against it; no capacity check here (the caller
        planned on what was free)."""
        if key in self._holds:
            raise ReservationError("hold %r exists" % (key,))
        self._holds[key] = dict(loads_mbps)
        for edge, load in loads_mbps.items():
            self.reserved_mbps[edge] += load

    def hold_if_free(self, key, loads_mbps):
        """hold() if every load still fits under its link's or aggregator's capacity minus
        what is booked now, else ReservationError naming the first that does not (and
        nothing changes). For loads planned on an earlier state of the book, within
        their LP's tolerance (booked as what is free, so the book never passes a
        capacity). What `key` holds already counts as free and is replaced."""
        free = self._free(loads_mbps, self.reserved_without(key),
                          "%s has only %.3f Mbit/s unreserved, the plan needs %.3f")
        # never past capacity: see fits_in
        booked = {resource: min(load, max(free[resource], 0.0))
                  for resource, load in loads_mbps.items()}
        self.release_hold(key)
        self.hold(key, booked)

    def rebook(self, key, loads_mbps, trees, check=False):
        """What `key` holds booked as loads_mbps and each reservation of `trees` ({tree
        id: MulticastTree}) moved to its new tree, together: a job's parts at another rate.
        With `check` (a rise), ReservationError and nothing changes unless every link's
        and aggregator's new load fits, what `key` and those trees held counted as free."""
        if check:
            self._check_rebook(key, loads_mbps, trees)
        self.release_hold(key)
        self.hold(key, loads_mbps)
        for tree_id, tree in trees.items():
            self.replace(tree_id, tree)

    def _check_rebook(self, key, loads_mbps, trees):
        reserved = self.reserved_without(key)
        for resource, load in with_trees({}, [self.get(i).tree for i in trees]).items():
            reserved[resource] -= load
        self._free(with_trees(loads_mbps, trees.values()), reserved,
                   "%s has %.3f Mbit/s, which would need %.3f")

    def _free(self, loads_mbps, reserved, refusal):
        """{resource: Mbit/s free} under each load's link or aggregator, `reserved` taken;
        ReservationError (refusal % (resource, free, load)) at the first load that does
        not fit, as a planner's loads fit (fits_in)."""
        free = {}
        for resource, load in loads_mbps.items():
            capacity = (self.view.graph.edges[resource]["capacity_mbps"]
                        if isinstance(resource, tuple) else self.view.aggregators[resource])
            free[resource] = capacity - reserved.get(resource, 0.0)
            if not fits_in(free[resource], load, capacity, planned=True):
                raise ReservationError(refusal % (resource, free[resource], load))
        return free

    def reserved_without(self, key):
        """{link or aggregator: Mbit/s} booked now, without what `key` holds."""
        reserved = dict(self.reserved_mbps)
        for resource, load in self._holds.get(key, {}).items():
            reserved[resource] -= load
        return reserved

    def credit(self, key, loads_mbps):
        """Set what `key` gives back ({link or aggregator: Mbit/s}; {} or None: nothing):
        load that two bookings both hold and never use at once, such as two jobs that
        take turns (services/turn_taking.py), so that each link holds the larger of
        their loads, not their sum. No capacity check: a credit only frees."""
        for resource, load in self.credits.pop(key, {}).items():
            self.reserved_mbps[resource] += load
        given = {resource: load for resource, load in (loads_mbps or {}).items() if load > 0}
        if given:
            self.credits[key] = given
        for resource, load in given.items():
            self._unbook(resource, load)

    def release_hold(self, key):
        for edge, load in self._holds.pop(key, {}).items():
            self._unbook(edge, load)

    def _unbook(self, edge, load):
        self.reserved_mbps[edge] -= load
        # below nothing only while a credit waits for the trees it lets fit (a restore)
        if abs(self.reserved_mbps[edge]) <= CAPACITY_TOLERANCE_MBPS:
            del self.reserved_mbps[edge]

    def expired(self, now):
        """Ids of reservations whose lease has run out at `now`."""
        return [r.tree_id for r in self if r.expires_at is not None and r.expires_at <= now]
