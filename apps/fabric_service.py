"""The fabric service (no Ryu): which switches are connected and synced, which links are
down, the unicast routes around them, and the one link ledger every service books into.

The fabric app feeds it OpenFlow events and sends the messages it returns. The other
services use only its narrow interface: `ready()`, `ledger`, `generation`,
`datapath_of(switch)`, `is_synced(switch)`, `down_links` and `measured_mbps()`.
`generation` counts fabric descriptions: a service that booked in an older one knows
its bookings are gone.
"""

import logging
from collections import defaultdict

from apps import openflow_builders as of
from apps.fabric_view import FabricView
from apps.link_load import PortRates, link_report, measured_mbps
from apps.reservations import ReservationBook
from apps.service_errors import NotReady
from apps.unicast_routes import unicast_rules

LOG = logging.getLogger("syncfabric.fabric")


def rules_per_switch(view, down_links=frozenset()):
    """{switch: [ForwardingRule]} of the unicast routes around down_links."""
    rules = defaultdict(list)
    for rule in unicast_rules(view, down_links):
        rules[rule.switch].append(rule)
    return rules


class Fabric:
    def __init__(self, metrics):
        self.metrics = metrics
        self.view = None
        self.ledger = None              # ReservationBook of the current view
        self.generation = 0
        self.down_links = frozenset()   # frozensets of the two switches of each link down
        self.rates = PortRates()
        self._rules = {}
        self._datapaths = {}            # dpid -> datapath
        self._synced = set()            # dpids cleared and holding the fabric flows
        self._port_down = set()         # (switch, port) reported down

    # --- what the other services use --------------------------------------------

    def ready(self):
        """The current view; NotReady if no fabric description is loaded."""
        if self.view is None:
            raise NotReady("no fabric description loaded (PUT /fabric/topology)")
        return self.view

    def datapath_of(self, switch):
        """The switch's datapath, or None if it is not connected."""
        return self._datapaths.get(self.view.dpid(switch))

    def datapaths_of(self, switches):
        """{switch: datapath} for all of them; NotReady naming those not connected."""
        datapaths = {switch: self.datapath_of(switch) for switch in switches}
        missing = [s for s in dict.fromkeys(switches) if datapaths[s] is None]
        if missing:
            raise NotReady("switch(es) not connected: %s" % ", ".join(missing))
        return datapaths

    def is_synced(self, switch):
        return self.view.dpid(switch) in self._synced

    def measured_mbps(self):
        return measured_mbps(self.view, self.rates)

    # --- what the fabric app feeds in ---------------------------------------------

    def load(self, description, restored=False):
        """Adopt a description (FabricError if invalid; then nothing changes): a new
        ledger and generation. `restored`: the one saved before a restart. Returns {datapath: messages} to clear and set up every
        connected switch."""
        view = FabricView(description)
        self._rules = rules_per_switch(view)
        self.view, self.ledger = view, ReservationBook(view)
        self.generation += 1
        self._synced.clear()
        self._port_down.clear()
        self.down_links = frozenset()
        LOG.info("fabric %s: %d switches, %d hosts, %d unicast rules",
                 "restored" if restored else "loaded", len(view.switches), len(view.hosts),
                 sum(map(len, self._rules.values())))
        return {dp: messages for dp in list(self._datapaths.values())
                for messages in [self.switch_connected(dp)] if messages}

    def switch_connected(self, datapath):
        """Remember the datapath; the messages that clear it and give it the fabric flows
        (None: no fabric yet, or a switch not in it)."""
        self._datapaths[datapath.id] = datapath
        self._synced.discard(datapath.id)
        if self.view is None:
            LOG.info("dpid %#x connected; waiting for PUT /fabric/topology", datapath.id)
            return None
        switch = self.view.switch_by_dpid.get(datapath.id)
        if switch is None:
            LOG.warning("dpid %#x is not in the fabric description; leaving it alone", datapath.id)
            return None
        self._port_down = {p for p in self._port_down if p[0] != switch}   # it reports afresh
        messages = of.switch_reset(datapath) + self._fabric_flows(datapath, switch)
        LOG.info("%s (dpid %#x): sent %d flow mods", switch, datapath.id, len(messages))
        return messages

    def switch_confirmed(self, datapath, batch):
        """The switch answered its set-up batch: the switch's name if it is synced now
        (the apps then install their state there), else None."""
        switch = self.view.switch_by_dpid.get(datapath.id) if self.view else None
        if switch is None or self._datapaths.get(datapath.id) is not datapath:
            return None
        if not batch.confirmed:
            LOG.error("%s did not take the fabric flows: %s", switch, batch.reason())
            return None
        self._synced.add(datapath.id)
        self.metrics.reconciliations.labels(switch).inc()
        LOG.info("%s (dpid %#x): cleared, fabric flows confirmed", switch, datapath.id)
        return switch

    def switch_gone(self, datapath):
        """True if it was the connected datapath of its dpid (then it is forgotten)."""
        dpid = datapath.id
        if dpid is None or self._datapaths.get(dpid) is not datapath:
            return False
        del self._datapaths[dpid]
        self._synced.discard(dpid)
        self.rates.forget(dpid)
        LOG.info("dpid %#x disconnected", dpid)
        return True

    def port_status(self, dpid, port, down):
        """A port went down or up; False if it is not a port of a fabric switch."""
        switch = self.view.switch_by_dpid.get(dpid) if self.view else None
        if switch is None:
            return False
        (self._port_down.add if down else self._port_down.discard)((switch, port))
        return True

    def port_counters(self, dpid, stats):
        """Port statistics: (port_no, tx_bytes, rx_bytes, age_s) per port."""
        for port, tx_bytes, rx_bytes, age_s in stats:
            self.rates.update(dpid, port, "tx", tx_bytes, age_s)
            self.rates.update(dpid, port, "rx", rx_bytes, age_s)

    def recompute_links(self):
        """Which fabric links are down (a port down at either end, or a switch not
        connected). None if that did not change; else {datapath: messages} that route
        unicast around them on every connected switch."""
        if self.view is None:
            return None
        down = set()
        for switch, port in self._port_down:
            neighbour = self.view.fabric_neighbour(switch, port)
            if neighbour is not None:
                down.add(frozenset((switch, neighbour)))
        for switch in self.view.switches:
            if self.view.dpid(switch) not in self._datapaths:
                down |= self.view.fabric_links_of(switch)
        down = frozenset(down)
        if down == self.down_links:
            return None
        self.down_links = down
        self._rules = rules_per_switch(self.view, down)
        LOG.info("fabric links down: %s; unicast routes recomputed",
                 ", ".join(sorted("-".join(sorted(link)) for link in down)) or "none")
        return {dp: self._fabric_flows(dp, self.view.switch_by_dpid[dpid])
                for dpid, dp in list(self._datapaths.items()) if dpid in self.view.switch_by_dpid}

    def _fabric_flows(self, datapath, switch):
        return of.fabric_flows(datapath, self.view.host_ports(switch), self._rules.get(switch, []))

    def connected(self):
        return list(self._datapaths.values())

    # --- reports ----------------------------------------------------------------

    def topology_report(self):
        """The description, each switch marked connected/synced, plus unknown connected dpids."""
        report = ({"switches": [], "links": [], "hosts": []} if self.view is None
                  else self.view.to_description())
        known = set()
        for switch in report["switches"]:
            known.add(switch["dpid"])
            switch["connected"] = switch["dpid"] in self._datapaths
            switch["synced"] = switch["dpid"] in self._synced
        report["unknown_dpids"] = sorted(set(self._datapaths) - known)
        return report

    def link_states(self):
        """Every directed link's capacity, reservations, rate and utilization."""
        return [] if self.view is None else link_report(self.view, self.rates,
                                                        self.ledger.reserved_mbps)

    def links_report(self, interval_s):
        return {"interval_s": interval_s, "links": self.link_states()}
