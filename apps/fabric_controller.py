"""Fabric controller: topology from a description, proxy ARP, proactive ECMP-like
unicast routes, port-statistics polling, and a JSON REST API.

Launch::

    ryu-manager --ofp-tcp-listen-port 6653 --wsapi-port 8080 apps.fabric_controller

then hand it the fabric (experiments/testbed.py does this for you)::

    python -m mininet_topos.spineleaf 8 8 2 --bw 20 > fabric.json
    curl -X PUT --data @fabric.json http://127.0.0.1:8080/fabric/topology

When a switch connects (first time, after a restart, or to a restarted
controller) it is cleared of every flow, group and meter of ours, gets the
fabric flows, and EventSwitchSynced tells the other apps to install there
what they know, so a switch holds exactly what the controller reports.

With a state directory (apps/state_files.py) the description is saved on every
PUT and loaded again when the controller starts, so a restarted controller
needs no PUT; a PUT always reloads (and releases every tree).

REST: GET/PUT /fabric/topology, GET /fabric/links. Decisions come from the pure
modules fabric_view, unicast_routes and link_load; this app only turns events
into calls and decisions into the messages of openflow_builders.
"""

from collections import defaultdict

from ryu.app.wsgi import ControllerBase, WSGIApplication, route
from ryu.base import app_manager
from ryu.controller import event, ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from ryu.lib import hub
from ryu.ofproto import ofproto_v1_3

from apps import openflow_builders as of
from apps import state_files
from apps.arp_responder import arp_reply
from apps.fabric_view import FabricError, FabricView
from apps.link_load import PortRates, link_report
from apps.ofp_transactions import BarrierTracker
from apps.rest_json import RequestError, answer, json_response, read_json_body
from apps.unicast_routes import unicast_rules

STATS_INTERVAL_S = 1.0
REST_APP_KEY = "fabric_controller"


def rules_per_switch(view, down_links=frozenset()):
    """{switch: [ForwardingRule]} of the unicast routes around down_links."""
    rules = defaultdict(list)
    for rule in unicast_rules(view, down_links):
        rules[rule.switch].append(rule)
    return rules


class EventFabricChanged(event.EventBase):
    """A new fabric description was adopted; `view` is its FabricView. `restored`: it is
    the one saved before a restart (the apps restore what they saved with it)."""

    def __init__(self, view, restored=False):
        super().__init__()
        self.view, self.restored = view, restored


class EventSwitchSynced(event.EventBase):
    """`switch` (connected as `datapath`) was cleared of everything of ours and holds the
    fabric flows again: the other apps install there what they have (trees, plans)."""

    def __init__(self, switch, datapath):
        super().__init__()
        self.switch, self.datapath = switch, datapath


class EventLinksChanged(event.EventBase):
    """The set of fabric links that are down changed; `down_links`: frozensets of the two
    switches of each link that is down now."""

    def __init__(self, down_links):
        super().__init__()
        self.down_links = down_links


class FabricController(app_manager.RyuApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    _CONTEXTS = {"wsgi": WSGIApplication}
    _EVENTS = [EventFabricChanged, EventSwitchSynced, EventLinksChanged]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.view = None
        self.rules_by_switch = {}
        self.datapaths = {}
        self.synced_dpids = set()
        self.port_down = set()     # (switch, port) reported down by port status
        self.down_links = frozenset()
        self.tracker = BarrierTracker()
        self.rates = PortRates()
        kwargs["wsgi"].register(FabricRestApi, {REST_APP_KEY: self})
        self.stats_thread = hub.spawn(self._poll_port_stats)

    def start(self):
        """Load the description saved before a restart, once every app listens for events."""
        thread = super().start()
        description = state_files.load("fabric")
        if description is not None:
            try:
                self.load_fabric(description, restored=True)
            except FabricError as error:
                self.logger.error("saved fabric description unusable (%s); waiting for "
                                  "PUT /fabric/topology", error)
        return thread

    # --- fabric description -------------------------------------------------

    def load_fabric(self, description, restored=False):
        """Adopt a new description (FabricError if invalid; then nothing changes)."""
        view = FabricView(description)
        rules_by_switch = rules_per_switch(view)
        self.view, self.rules_by_switch = view, rules_by_switch
        self.synced_dpids.clear()
        self.port_down.clear()
        self.down_links = frozenset()
        self.logger.info("fabric %s: %d switches, %d hosts, %d unicast rules",
                         "restored" if restored else "loaded", len(view.switches), len(view.hosts),
                         sum(map(len, rules_by_switch.values())))
        if not restored:
            state_files.save("fabric", description)
        self.send_event_to_observers(EventFabricChanged(view, restored))
        for datapath in list(self.datapaths.values()):
            self._install_fabric(datapath)

    def _install_fabric(self, datapath):
        if self.view is None:
            self.logger.info("dpid %#x connected; waiting for PUT /fabric/topology", datapath.id)
            return
        switch = self.view.switch_by_dpid.get(datapath.id)
        if switch is None:
            self.logger.warning("dpid %#x is not in the fabric description; leaving it alone",
                                datapath.id)
            return
        self.port_down = {p for p in self.port_down if p[0] != switch}   # it reports afresh
        messages = of.switch_reset(datapath) + of.fabric_flows(
            datapath, self.view.host_ports(switch), self.rules_by_switch.get(switch, []))
        self.tracker.send({datapath: messages},
                          on_done=lambda batch: self._fabric_confirmed(switch, datapath, batch))
        self.logger.info("%s (dpid %#x): sent %d flow mods", switch, datapath.id, len(messages))

    def _fabric_confirmed(self, switch, datapath, batch):
        if batch.errors:
            self.logger.error("%s rejected %d fabric flow mods", switch, len(batch.errors))
        elif self.datapaths.get(datapath.id) is datapath:
            self.synced_dpids.add(datapath.id)
            self.logger.info("%s (dpid %#x): cleared, fabric flows confirmed", switch, datapath.id)
            self.send_event_to_observers(EventSwitchSynced(switch, datapath))
            self._links_changed()

    def _links_changed(self):
        """Recompute which fabric links are down (a port down at either end, or a switch
        gone); if that changed, route unicast around them and tell the other apps."""
        down = set()
        for switch, port in self.port_down:
            neighbour = self.view.fabric_neighbour(switch, port)
            if neighbour is not None:
                down.add(frozenset((switch, neighbour)))
        for switch in self.view.switches:
            if self.view.dpid(switch) not in self.datapaths:
                down |= self.view.fabric_links_of(switch)
        down = frozenset(down)
        if down == self.down_links:
            return
        self.down_links = down
        self.rules_by_switch = rules_per_switch(self.view, down)
        self.logger.info("fabric links down: %s; unicast routes recomputed",
                         ", ".join(sorted("-".join(sorted(link)) for link in down)) or "none")
        for datapath in list(self.datapaths.values()):
            switch = self.view.switch_by_dpid.get(datapath.id)
            if switch is not None:
                self.tracker.send({datapath: of.fabric_flows(datapath, self.view.host_ports(switch),
                                                              self.rules_by_switch.get(switch, []))})
        self.send_event_to_observers(EventLinksChanged(down))

    def topology_report(self):
        """The description, each switch marked connected/synced, plus unknown connected dpids."""
        if self.view is None:
            report = {"switches": [], "links": [], "hosts": []}
        else:
            report = self.view.to_description()
        known = set()
        for switch in report["switches"]:
            known.add(switch["dpid"])
            switch["connected"] = switch["dpid"] in self.datapaths
            switch["synced"] = switch["dpid"] in self.synced_dpids
        report["unknown_dpids"] = sorted(set(self.datapaths) - known)
        return report

    def links_report(self):
        links = [] if self.view is None else link_report(self.view, self.rates)
        return {"interval_s": STATS_INTERVAL_S, "links": links}

    # --- OpenFlow events ----------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _switch_features(self, ev):
        datapath = ev.msg.datapath
        self.datapaths[datapath.id] = datapath
        self._install_fabric(datapath)

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def _switch_gone(self, ev):
        dpid = ev.datapath.id
        if dpid is not None and self.datapaths.get(dpid) is ev.datapath:
            del self.datapaths[dpid]
            self.synced_dpids.discard(dpid)
            self.rates.forget(dpid)
            self.logger.info("dpid %#x disconnected", dpid)
            if self.view is not None:
                self._links_changed()

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev):
        msg = ev.msg
        ofproto = msg.datapath.ofproto
        switch = self.view.switch_by_dpid.get(msg.datapath.id) if self.view else None
        if switch is None:
            return
        port = (switch, msg.desc.port_no)
        down = (msg.reason == ofproto.OFPPR_DELETE or msg.desc.state & ofproto.OFPPS_LINK_DOWN
                or msg.desc.config & ofproto.OFPPC_PORT_DOWN)
        (self.port_down.add if down else self.port_down.discard)(port)
        self._links_changed()

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier_reply(self, ev):
        self.tracker.barrier_reply(ev.msg)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev):
        msg = ev.msg
        self.tracker.error(msg)
        self.logger.error("dpid %#x rejected message xid %d: type=%d code=%d",
                          msg.datapath.id, msg.xid, msg.type, msg.code)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev):
        msg = ev.msg
        if self.view is None:
            return
        reply = arp_reply(self.view, msg.data)
        if reply is not None:
            in_port = msg.match["in_port"]
            msg.datapath.send_msg(of.packet_out(msg.datapath, in_port, reply))
            self.logger.debug("dpid %#x port %d: answered ARP", msg.datapath.id, in_port)

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    def _port_stats(self, ev):
        dpid = ev.msg.datapath.id
        max_port = ev.msg.datapath.ofproto.OFPP_MAX
        for stat in ev.msg.body:
            if stat.port_no > max_port:
                continue
            age_s = stat.duration_sec + stat.duration_nsec * 1e-9
            self.rates.update(dpid, stat.port_no, "tx", stat.tx_bytes, age_s)
            self.rates.update(dpid, stat.port_no, "rx", stat.rx_bytes, age_s)

    def _poll_port_stats(self):
        while True:
            for datapath in list(self.datapaths.values()):
                datapath.send_msg(of.port_stats_request(datapath))
            hub.sleep(STATS_INTERVAL_S)


class FabricRestApi(ControllerBase):
    """GET/PUT /fabric/topology and GET /fabric/links."""

    def __init__(self, req, link, data, **config):
        super().__init__(req, link, data, **config)
        self.fabric = data[REST_APP_KEY]

    @route("fabric", "/fabric/topology", methods=["GET"])
    def get_topology(self, req, **_kwargs):
        return json_response(self.fabric.topology_report())

    @route("fabric", "/fabric/topology", methods=["PUT"])
    def put_topology(self, req, **_kwargs):
        def load():
            try:
                self.fabric.load_fabric(read_json_body(req))
            except FabricError as error:
                raise RequestError(400, "invalid fabric description: %s" % error) from None
            return self.fabric.topology_report(), 200
        return answer(req, load)

    @route("fabric", "/fabric/links", methods=["GET"])
    def get_links(self, req, **_kwargs):
        return json_response(self.fabric.links_report())


if __name__ not in ("apps.fabric_controller", "__main__"):   # ryu-manager apps/fabric_controller.py
    from apps.launch_by_path import stand_in
    stand_in(globals())
