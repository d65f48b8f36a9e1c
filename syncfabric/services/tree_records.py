"""The live multicast trees saved for a controller restart, and booked again from what
was saved (no Ryu): the switches get them back as they sync."""

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
        for reservation in book]})


def restored_trees(store, book, now):
    """Book the trees saved before a restart in `book`; {tree id: release key} of those
    restored. One that no longer fits is logged and left out."""
    release_keys = {}
    for record in (store.load(STATE_NAME) or {}).get("trees", []):
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
