"""Make-before-break reroutes of live trees around failed links (no Ryu): the trees
service's trees computed again without the links that are down (multicast_trees.
repaired_tree), installed and confirmed beside the old state, rebooked, and only then
is what only the old tree had removed. A tree that fits nowhere is released."""

import logging
from collections import defaultdict

from apps import openflow_builders as of
from apps.multicast_trees import InfeasibleTree, forwarding_plan, police_mbps, repaired_tree
from apps.reservations import ReservationError
from apps.service_errors import InstallFailed, NotReady

LOG = logging.getLogger("syncfabric.multicast")


def reroute_broken(trees, now):
    """Move every live tree that uses a link that is down onto the rest of the fabric.
    Which links are down is read afresh for each tree: they change while trees move
    (e.g. switches connecting one by one)."""
    if trees.book is None or trees.generation != trees.fabric.generation:
        return
    for tree_id in sorted(trees.book.ids()):
        try:
            edges = trees.book.get(tree_id).tree.edges
        except ReservationError:
            continue   # released meanwhile
        down_links = trees.fabric.down_links
        if any(frozenset(edge) in down_links for edge in edges):
            with trees.metrics.reroute_seconds.labels("trees").time():
                _reroute(trees, tree_id, down_links, now)


def _reroute(trees, tree_id, down_links, now):
    """Make-before-break: compute the tree again without the down links (its own
    bandwidth counted free), install the new switch state and confirm it, then
    remove what only the old tree had, and rebook. If no tree fits, release it."""
    book, view = trees.book, trees.book.view
    old = book.get(tree_id)
    try:
        tree = repaired_tree(view, old.tree, book.reserved_mbps, down_links, trees.rng)
        datapaths = trees.fabric.datapaths_of([s for s, _, _ in forwarding_plan(view, tree)])
    except (InfeasibleTree, NotReady) as error:
        # a switch away or still connecting: it gets the tree when it has synced. Synced,
        # not connected: down links count a connected switch as gone until then
        away = [s for s, _, _ in forwarding_plan(view, old.tree) if not trees.fabric.is_synced(s)]
        if away:
            LOG.warning("tree %d: no way around %s, not synced (%s); kept for when it is",
                        tree_id, ",".join(away), error)
            return
        LOG.warning("tree %d crosses a failed link and no other tree fits (%s): releasing it",
                    tree_id, error)
        _released(trees, tree_id, now, book)
        return
    # the links only the new tree uses are held while it is installed: requests
    # admitted meanwhile see them taken
    hold = ("reroute", tree_id)
    book.hold(hold, {edge: tree.bandwidth_mbps for edge in set(tree.edges) - set(old.tree.edges)})
    try:
        _move_tree(trees, book, view, old, tree, datapaths, now)
    finally:
        book.release_hold(hold)


def _move_tree(trees, book, view, old, tree, datapaths, now):
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
                                                  out_ports, police_mbps(view, tree, switch))
    try:
        trees.installer.install(messages)
    except InstallFailed as failure:
        LOG.error("tree %d: the new tree was not confirmed (%s); releasing it", tree_id, failure)
        _released(trees, tree_id, now, book)
        return
    if trees.book is not book or tree_id not in book.ids():   # released meanwhile
        trees.installer.send({datapaths[s]: of.tree_removal(datapaths[s], tree_id,
                                                            police_mbps(view, tree, s) is not None)
                             for s in {s for s, _, _ in new_plan} - set(old_plan)})
        return
    book.replace(tree_id, tree)
    trees.remember(now)
    new_in_port = {switch: in_port for switch, in_port, _ in new_plan}
    removals = {}
    for switch, in_port in old_plan.items():
        datapath = trees.connected(view, switch)
        if datapath is None:
            continue
        if switch not in new_in_port:
            removals[datapath] = of.tree_removal(datapath, tree_id,
                                                 police_mbps(view, old.tree, switch) is not None)
        elif new_in_port[switch] != in_port:
            removals[datapath] = [of.tree_flow_removal(datapath, tree_id, old.address, in_port)]
    trees.installer.send(removals)
    trees.metrics.reroutes.labels("trees", "moved").inc()
    LOG.info("tree %d rerouted around failed link(s): now via %s", tree_id,
             ",".join(s for s, _, _ in new_plan))


def _released(trees, tree_id, now, book):
    trees.metrics.reroutes.labels("trees", "released").inc()
    trees.metrics.releases.labels("trees", "reroute").inc()
    trees.release_if_booked(tree_id, now, book)
