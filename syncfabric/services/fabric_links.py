"""Which fabric links are down, and the unicast routes around them: a link is down when a
port at either end is, or when a switch at its end is not connected (one that was, or
any once the grace after loading is over). Each synced switch is kept on the routes
around the links that are down, by differences (routes added or overwritten in place,
then the old ones removed)."""

import logging

from syncfabric.decisions.unicast_routes import RoutesAround
from syncfabric.openflow import builders as of

LOG = logging.getLogger("syncfabric.fabric")
ROUTE_SETS_KEPT = 16   # sets of down links whose unicast routes are kept for reuse
# a switch that has not connected since the fabric was loaded counts as up this long:
# after a controller restart switches connect one by one, each forwarding on its tables
CONNECT_GRACE_S = 10.0


class FabricLinks:
    """The link state of one fabric view, loaded at `loaded_at`."""

    def __init__(self, view, loaded_at):
        self.view, self.loaded_at = view, loaded_at
        self.down = frozenset()      # frozensets of the two switches of each link down
        self.ports_down = set()      # (switch, port) reported down
        self.routes_around = RoutesAround(view, ROUTE_SETS_KEPT)
        self.routed = {}             # synced switch -> the rules it was given

    def port_status(self, switch, port, down):
        (self.ports_down.add if down else self.ports_down.discard)((switch, port))

    def switch_connected(self, switch):
        """A switch that connects reports its ports afresh."""
        self.ports_down = {p for p in self.ports_down if p[0] != switch}

    def links_down(self, now, absent):
        """Links down at `now`: a port down at either end, or a switch that absent(switch,
        grace_over) calls absent; with now None, only those with a port down."""
        down = set()
        for switch, port in self.ports_down:
            neighbour = self.view.fabric_neighbour(switch, port)
            if neighbour is not None:
                down.add(frozenset((switch, neighbour)))
        grace_over = now is not None and now - self.loaded_at >= CONNECT_GRACE_S
        for switch in self.view.switches if now is not None else []:
            if absent(switch, grace_over):
                down |= self.view.fabric_links_of(switch)
        return frozenset(down)

    def reconciled_routes(self, switch):
        """The routes a switch that is being reconciled gets: those around the links with
        a port down, every switch merely not connected (yet: e.g. all of them after a
        controller restart) counted up, so a switch that kept its tables keeps its
        routes."""
        return self.routes_around(self.links_down(None, None)).get(switch, [])

    def update(self, down, synced):
        """Adopt the links that are down; (changed, {datapath: messages}) that bring every
        synced switch ({switch: datapath}) to the routes around them."""
        changed = down != self.down
        if changed:
            self.down = down
            LOG.info("fabric links down: %s; unicast routes recomputed",
                     ", ".join(sorted("-".join(sorted(link)) for link in down)) or "none")
        routes = self.routes_around(down)
        updates = {}
        for switch, datapath in synced.items():
            new = routes.get(switch, [])
            messages = of.route_changes(datapath, self.routed.get(switch, []), new)
            self.routed[switch] = new
            if messages:
                updates[datapath] = messages
        return changed, updates
