"""The live multicast trees saved for a controller restart, and booked again from what
was saved (no Ryu): the switches get them back as they sync. The book's credits (what
two jobs that take turns book once: services/turn_taking.py) are saved with them and
given back first, since the trees of such a pair fit only with their credit."""

import logging

from syncfabric.decisions.reservations import ReservationError

LOG = logging.getLogger("syncfabric.multicast")
STATE_NAME = "multicast"


def save_trees(store, book, release_keys, now):
    """Save every tree of `book` with its release key ({tree id: key}; None for a
    SELMCAST round's, which has none)."""
    store.save(STATE_NAME, {"trees": [
        dict(book.record(reservation.tree_id, now),
             release_key=release_keys.get(reservation.tree_id))
        for reservation in book], "credits": credit_records(book)})


def restored_trees(store, book, now):
    """Book the trees saved before a restart in `book`, after its credits; {tree id:
    release key} of those restored. One that no longer fits is logged and left out."""
    release_keys, saved = {}, store.load(STATE_NAME) or {}
    for record in saved.get("credits", []):
        try:
            restore_credit(book, record)
        except ReservationError as error:
            LOG.error("saved credit not restored: %s", error)
    for record in saved.get("trees", []):
        try:
            reservation = book.restore(record, now)
        except ReservationError as error:
            LOG.error("saved tree %s not restored: %s", record.get("id"), error)
            continue
        release_keys[reservation.tree_id] = record.get("release_key")
        LOG.info("tree %d restored: %s -> %d receivers at %.3f Mbit/s, address %s",
                 reservation.tree_id, reservation.tree.source, len(reservation.tree.receivers),
                 reservation.tree.bandwidth_mbps, reservation.address)
    return release_keys


def credit_records(book):
    """The book's credits (ReservationBook.credit) as JSON-able data: each key, and its
    loads with links as [tail, head]."""
    return [{"key": key, "loads": [[list(r) if isinstance(r, tuple) else r, load]
                                   for r, load in sorted(loads.items(), key=str)]}
            for key, loads in sorted(book.credits.items())]


def restore_credit(book, record):
    """Give back in `book` a credit credit_records() saved, before the trees it lets fit
    are restored; ReservationError (and nothing changes) if it is not one, or names a
    link or aggregator the fabric lacks."""
    try:
        loads = {tuple(r) if isinstance(r, list) else r: float(load)
                 for r, load in record["loads"]}
        key = str(record["key"])
    except (KeyError, TypeError, ValueError) as error:
        raise ReservationError("not a credit record: %r" % (error,)) from None
    view = book.view
    unknown = [r for r in loads if not (view.graph.has_edge(*r) if isinstance(r, tuple)
                                        and len(r) == 2 else r in view.aggregators)]
    if unknown:
        raise ReservationError("credit %s names links or aggregators not in this fabric: %s"
                               % (key, unknown))
    book.credit(key, loads)
