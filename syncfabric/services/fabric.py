"""The fabric service (no Ryu): which switches are connected and synced, which links are
down, the unicast routes around them, and the one reservation book every service books into.

The fabric app feeds it OpenFlow events and sends the messages it returns. The other
services use only its narrow interface: `ready()`, `book`, `generation`,
`datapath_of(switch)`, `datapaths_of(switches, synced)`, `is_synced(switch)`, `down_links`, `measured_mbps()` and
`add_share_provider()`. `generation` counts fabric descriptions: a service that booked
in an older one knows its bookings are gone.

A switch that connects is read first (its flows, groups and meters) and then given
only the difference from what the fabric and every share provider (the trees and
plans services) want there (syncfabric/openflow/switch_sync.py): a switch that kept its tables
through a controller restart or a reconnection is not touched. If anything was sent
to it while it was read, it is read again, so rules installed meanwhile (e.g. by a
reroute) are never taken for stale.
"""

import logging

from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.link_load import PortRates, link_report, measured_mbps
from syncfabric.decisions.reservations import ReservationBook
from syncfabric.errors import NotReady
from syncfabric.openflow import builders as of
from syncfabric.openflow.switch_sync import Readings, difference, summary
from syncfabric.services.fabric_links import FabricLinks
from syncfabric.services.switch_connections import SwitchConnections

LOG = logging.getLogger("syncfabric.fabric")


class Fabric:
    """The fabric's description, book and links, and its switches' connections
    (switch_connections.py), fed by the fabric app (module doc)."""

    def __init__(self, metrics, installer):
        self.metrics, self.installer = metrics, installer
        self.view = None
        self.book = None                # ReservationBook of the current view
        self.generation = 0
        self.links = None               # FabricLinks of the current view
        self.rates = PortRates()
        self.connections = SwitchConnections()
        self._readings = Readings()     # the switches being read
        self.strangers = Strangers(metrics)   # switches the description lacks
        self.shares = ShareProviders()  # what the other services want on each switch

    # --- what the other services use --------------------------------------------

    def ready(self):
        """The current view; NotReady if no fabric description is loaded."""
        if self.view is None:
            raise NotReady("no fabric description loaded (PUT /fabric/topology)")
        return self.view

    def datapath_of(self, switch):
        """The switch's datapath, or None if it is not connected."""
        return self.connections.datapaths.get(self.view.dpid(switch))

    def datapaths_of(self, switches, synced=False):
        """{switch: datapath} for all of them; NotReady naming those not connected (synced:
        or back and still being read, where a group added met the one it kept)."""
        datapaths = {switch: self.datapath_of(switch) for switch in switches}
        missing = [s for s in dict.fromkeys(switches)
                   if datapaths[s] is None or synced and not self.is_synced(s)]
        if missing:
            raise NotReady("switch(es) not %s: %s" % ("synced" if synced else "connected",
                                                       ", ".join(missing)))
        return datapaths

    def is_synced(self, switch):
        return self.view.dpid(switch) in self.connections.synced

    def away_for(self, switch, now):
        """Seconds since the switch disconnected if it is not synced again yet; None if
        it is synced or never disconnected."""
        return self.connections.away_for(self.view.dpid(switch), now)

    def measured_mbps(self):
        return measured_mbps(self.view, self.rates)

    def add_share_provider(self, provider):
        """provider(switch, datapath) -> the ADD messages of everything a service wants on
        that switch, or None while it has not adopted the current fabric."""
        self.shares.add(provider)

    # --- what the fabric app feeds in ---------------------------------------------

    def load(self, description, now, restored=False):
        """Adopt a description (FabricError if invalid; then nothing changes): a new
        book and generation. `restored`: the one saved before a restart. Returns
        {datapath: requests} that read every connected switch (see switch_connected)."""
        view = FabricView(description)
        self.links = FabricLinks(view, now)
        self.view, self.book = view, ReservationBook(view)
        self.generation += 1
        self.connections.fabric_loaded()
        LOG.info("fabric %s: %d switches, %d hosts, %d unicast rules",
                 "restored" if restored else "loaded", len(view.switches), len(view.hosts),
                 sum(map(len, self.links.routes_around(frozenset()).values())))
        return {dp: messages for dp in self.connected()
                for messages in [self.switch_connected(dp)] if messages}

    def switch_connected(self, datapath):
        """Remember the datapath; the requests that read what it holds (None: no fabric
        yet, or a switch not in it). Their replies go to contents_part()."""
        self.connections.connected(datapath)
        if self.view is None:
            LOG.info("dpid %#x connected; waiting for PUT /fabric/topology", datapath.id)
            return None
        switch = self.view.switch_by_dpid.get(datapath.id)
        if switch is None:
            self.strangers.connected(datapath.id)
            return None
        self.links.switch_connected(switch)
        LOG.info("%s (dpid %#x) connected: reading its flows, groups and meters", switch,
                 datapath.id)
        return self.read(datapath)

    def read(self, datapath):
        """The requests that read a switch (again)."""
        return self._readings.start(datapath, self.installer.sent_to(datapath.id))

    def contents_part(self, datapath, kind, entries, more, xid):
        """A reply (part) to read(): its kind (flows, groups or meters), its body's entries,
        whether more parts follow, and the xid it answers. True once every reply of the
        reading is complete."""
        if not self.connections.is_current(datapath):
            return False
        return self._readings.part(datapath.id, kind, entries, more, xid)

    def reconcile(self, datapath):
        """The messages that give a switch that was read completely exactly what the
        fabric and the share providers want there; None if it must be read again
        (something was sent to it meanwhile, or a service has not adopted the fabric)."""
        reading = self._readings.end(datapath.id)
        switch = self.view.switch_by_dpid.get(datapath.id) if self.view else None
        if reading is None or switch is None:
            return None
        if self.installer.sent_to(datapath.id) != reading.sent_mark:
            LOG.info("%s: sent messages while it was read; reading it again", switch)
            return None
        routes = self.links.reconciled_routes(switch)
        shares = self.shares.wanted(switch, datapath)
        if shares is None:
            return None
        wanted = fabric_flows(self.view, switch, datapath, routes) + shares
        held = reading.held()
        messages = difference(datapath, wanted, held)
        self.links.routed[switch] = routes
        log_reconciliation(switch, datapath, held, messages)
        return messages

    def switch_confirmed(self, datapath, batch):
        """The switch answered its reconciliation: the switch's name if it is synced now,
        else None."""
        switch = self.view.switch_by_dpid.get(datapath.id) if self.view else None
        if switch is None or not self.connections.is_current(datapath):
            return None
        if not batch.confirmed:
            LOG.error("%s did not take its reconciliation: %s", switch, batch.reason())
            return None
        self.connections.synced.add(datapath.id)
        self.metrics.reconciliations.labels(switch).inc()
        LOG.info("%s (dpid %#x): reconciled, synced", switch, datapath.id)
        return switch

    def switch_gone(self, datapath, now):
        """True if it was the connected datapath of its dpid (then it is forgotten)."""
        dpid = datapath.id
        if not self.connections.gone(datapath, now):
            return False
        self._readings.end(dpid)
        self.links.routed.pop(self.view.switch_by_dpid.get(dpid), None)
        self.rates.forget(dpid)
        LOG.info("dpid %#x disconnected", dpid)
        return True

    def port_status(self, dpid, port, down):
        """A port went down or up; False if it is not a port of a fabric switch."""
        switch = self.view.switch_by_dpid.get(dpid) if self.view else None
        if switch is None:
            return False
        self.links.port_status(switch, port, down)
        return True

    @property
    def down_links(self):
        """The fabric links that are down (frozensets of their two switches)."""
        return self.links.down if self.links is not None else frozenset()

    def recompute_links(self, now):
        """Which fabric links are down at `now` (a port down at either end, or a switch
        not connected: one that was, or any after fabric_links.CONNECT_GRACE_S). Returns
        (changed, {datapath: messages}): whether that set changed, and the route changes
        that bring every synced switch to the unicast routes around them."""
        if self.view is None:
            return False, {}

        def absent(switch, grace_over):
            return self.connections.absent(self.view.dpid(switch), grace_over)
        synced = {self.view.switch_by_dpid[dpid]: datapath
                  for dpid, datapath in self.connections.synced_datapaths().items()}
        return self.links.update(self.links.links_down(now, absent), synced)

    def connected(self):
        return list(self.connections.datapaths.values())

    # --- reports ----------------------------------------------------------------

    def topology_report(self):
        """The description, each switch marked connected/synced, plus unknown connected dpids."""
        return topology_report(self.view, set(self.connections.datapaths),
                               self.connections.synced)

    def link_states(self):
        """Every directed link's capacity, reservations, rate and utilization."""
        return [] if self.view is None else link_report(self.view, self.rates,
                                                        self.book.reserved_mbps)


class ShareProviders:
    """What the other services (trees, plans) want on a switch, asked at each
    reconciliation: each provider(switch, datapath) gives its ADD messages, or None
    while it has not adopted the current fabric."""

    def __init__(self):
        self.providers = []

    def add(self, provider):
        self.providers.append(provider)

    def wanted(self, switch, datapath):
        """Every provider's messages for the switch; None if any is not ready (the
        switch is then read again later)."""
        wanted = []
        for provider in self.providers:
            share = provider(switch, datapath)
            if share is None:
                return None
            wanted += share
        return wanted


class Strangers:
    """Switches that connect with a datapath id the fabric description lacks: they get
    nothing. Each connection is counted (syncfabric_unknown_switch_connections_total);
    the first of each dpid is logged, as such a switch may reconnect forever."""

    def __init__(self, metrics):
        self.metrics = metrics
        self.logged = set()   # dpids

    def connected(self, dpid):
        self.metrics.unknown_switches.inc()
        if dpid not in self.logged:
            self.logged.add(dpid)
            LOG.warning("dpid %#x is not in the fabric description: it gets no flows (logged "
                        "once; counted in syncfabric_unknown_switch_connections_total)", dpid)


def fabric_flows(view, switch, datapath, routes):
    """The fabric's own flows on a switch: admission's passes (from its fabric ports, and
    for what no plan closes), ARP trapping on its host ports, and its routes."""
    return of.fabric_flow_adds(datapath, view.host_ports(switch), routes,
                               view.fabric_ports(switch))


def log_reconciliation(switch, datapath, held, messages):
    LOG.info("%s (dpid %#x): holds %d flows, %d groups, %d meters of ours; %d changes sent%s",
             switch, datapath.id, len(held.flows), len(held.groups), len(held.meters),
             len(messages), " (%s)" % summary(messages) if messages else "")


def topology_report(view, connected, synced):
    """The description (empty without a view), each switch marked connected and synced
    by its dpid, plus the dpids connected that are not in it."""
    report = ({"switches": [], "links": [], "hosts": []} if view is None
              else view.to_description())
    for switch in report["switches"]:
        switch["connected"] = switch["dpid"] in connected
        switch["synced"] = switch["dpid"] in synced
    report["unknown_dpids"] = sorted(connected - {s["dpid"] for s in report["switches"]})
    return report
