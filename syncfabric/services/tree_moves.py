"""Make-before-break reroutes of live trees around failed links (no Ryu): the trees
service's trees computed again without the links that are down (multicast_trees.
repaired_tree), installed and confirmed beside the old state, rebooked, and only then
is what only the old tree had removed. A tree that fits nowhere is released. Until a
tree has moved, its ingress switch's FAST_FAILOVER groups already send it over its
backup uplinks (local repair); a tree whose backup went down gets another."""

import logging
from collections import defaultdict
from dataclasses import replace

from syncfabric.decisions.multicast_trees import (InfeasibleTree, backup_links, repaired_tree,
                                                  switch_shares)
from syncfabric.decisions.reservations import ReservationError
from syncfabric.errors import InstallFailed, NotReady
from syncfabric.openflow.tree_messages import tree_changes

LOG = logging.getLogger("syncfabric.multicast")


def reroute_broken(trees, now):
    """Move every live tree that uses a link that is down onto the rest of the fabric,
    and choose the backup uplinks again of a tree that lost one or can have more. Which
    links are down is read afresh for each tree: they change while trees move (e.g.
    switches connecting one by one)."""
    if trees.book is None or trees.generation != trees.fabric.generation:
        return
    then_break = defaultdict(list)   # every moved tree's, sent after one drain
    for tree_id in sorted(trees.book.ids()):
        try:
            tree = trees.book.get(tree_id).tree
        except ReservationError:
            continue   # released meanwhile
        down_links = trees.fabric.down_links
        if any(frozenset(edge) in down_links for edge in tree.edges):
            with trees.metrics.reroute_seconds.labels("trees").time():
                moved = _reroute(trees, tree_id, down_links, now)
        else:
            moved = _rebackup(trees, tree_id, now)
        for datapath, messages in moved.items():
            then_break[datapath] += messages
    trees.installer.send_after_drain(then_break)


def _reroute(trees, tree_id, down_links, now):
    """Make-before-break: compute the tree again without the down links (its own
    bandwidth counted free), install the new switch state and confirm it, and rebook;
    returns what only the old tree had, to remove. If no tree fits, release it."""
    book, view = trees.book, trees.book.view
    old = book.get(tree_id)
    try:
        tree = trees.backed_up(view, repaired_tree(view, old.tree, book.reserved_mbps, down_links,
                                                   trees.rng), book.reserved_mbps)
        datapaths = trees.fabric.datapaths_of(list(switch_shares(view, tree)))
    except (InfeasibleTree, NotReady) as error:
        # a switch away or still connecting: it gets the tree when it has synced. Synced,
        # not connected: down links count a connected switch as gone until then
        away = [s for s in switch_shares(view, old.tree) if not trees.fabric.is_synced(s)]
        if away:
            LOG.warning("tree %d: no way around %s, not synced (%s); kept for when it is",
                        tree_id, ",".join(away), error)
            return {}
        LOG.warning("tree %d crosses a failed link and no other tree fits (%s): releasing it",
                    tree_id, error)
        _released(trees, tree_id, now, book)
        return {}
    # the links only the new tree uses are held while it is installed: requests
    # admitted meanwhile see them taken
    hold = ("reroute", tree_id)
    book.hold(hold, {edge: tree.bandwidth_mbps for edge in set(tree.edges) - set(old.tree.edges)})
    try:
        then_break = _move_tree(trees, book, view, old, tree, datapaths, now)
    finally:
        book.release_hold(hold)
    if then_break is not None:
        trees.metrics.reroutes.labels("trees", "moved").inc()
        LOG.info("tree %d rerouted around failed link(s): now via %s", tree_id,
                 ",".join(switch_shares(view, tree)))
    return then_break or {}


def _rebackup(trees, tree_id, now):
    """The same tree with its backup uplinks chosen again, if one of them went down or
    an uplink without one can have one now (a link came back); returns what only the
    old backups had, to remove."""
    book, view = trees.book, trees.book.view
    old = book.get(tree_id)
    tree = trees.backed_up(view, replace(old.tree, backups=()), book.reserved_mbps)
    down_links = trees.fabric.down_links
    if len(tree.backups) <= len(old.tree.backups) and not any(
            frozenset(link) in down_links for link in backup_links(old.tree)):
        return {}
    try:
        datapaths = trees.fabric.datapaths_of(list(switch_shares(view, tree)), synced=True)
    except NotReady:   # one away or still being read: chosen again when it syncs
        return {}
    then_break = _move_tree(trees, book, view, old, tree, datapaths, now)
    if then_break is not None:
        LOG.info("tree %d: backup uplinks now %s", tree_id,
                 "; ".join("%s->%s for %s" % (s, b, p) for s, p, b in tree.backups) or "none")
    return then_break or {}


def _move_tree(trees, book, view, old, tree, datapaths, now):
    """Install `tree` where `old` was (same id and address), confirm and rebook; returns
    what only the old one had, to remove after a drain (None if the tree did not
    move: the switches refused and it was released, or a DELETE took it)."""
    tree_id = old.tree_id
    old_shares, new_shares = switch_shares(view, old.tree), switch_shares(view, tree)
    make, then_break = defaultdict(list), {}
    for switch in dict.fromkeys(list(new_shares) + list(old_shares)):
        datapath = datapaths.get(switch) or trees.connected(view, switch)
        if datapath is None:
            continue
        make[datapath], then_break[datapath] = tree_changes(
            datapath, tree_id, old.address, old_shares.get(switch), new_shares.get(switch))
    trees.moving.add(tree_id)   # switches that connect meanwhile wait for the new tree
    try:
        try:
            trees.installer.install({datapath: messages for datapath, messages in make.items()
                                     if messages})
        except InstallFailed as failure:
            LOG.error("tree %d: the new tree was not confirmed (%s); releasing it", tree_id,
                      failure)
            _released(trees, tree_id, now, book)
            return None
        if trees.book is not book or tree_id not in book.ids():
            # released meanwhile: the release removed what the old tree had, and make may
            # have added more (a switch, a FAST_FAILOVER group): remove all of the tree
            trees.installer.send({datapaths[s]: tree_changes(datapaths[s], tree_id,
                                                             old.address, new_shares[s],
                                                             None)[1]
                                  for s in new_shares})
            return None
        book.replace(tree_id, tree)
    finally:
        trees.moving.discard(tree_id)
    trees.remember(now)
    return then_break


def _released(trees, tree_id, now, book):
    trees.metrics.reroutes.labels("trees", "released").inc()
    trees.metrics.releases.labels("trees", "reroute").inc()
    trees.release_if_booked(tree_id, now, book)
