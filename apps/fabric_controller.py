"""Fabric controller app: routes OpenFlow events, REST calls and timers to the fabric
service (syncfabric/services/fabric.py) and sends what it returns; it also routes every app's
barrier replies, errors and disconnections to the one installer.

    ryu-manager --ofp-tcp-listen-port 6653 --wsapi-port 8080 apps.fabric_controller
    python -m mininet_topos.spineleaf 8 8 2 --bw 20 > fabric.json
    curl -X PUT --data @fabric.json http://127.0.0.1:8080/fabric/topology

A switch that connects is read (flows, groups, meters) and given only the difference
from what the fabric and the other apps want there: one that kept its tables through a
restart or reconnection forwards on untouched (syncfabric/services/fabric.py). With a state
directory (syncfabric/services/state_files.py) the description is saved on every PUT and loaded again
when the controller starts. REST: GET/PUT /fabric/topology,
GET /fabric/links; and for every app, GET /openapi.json, /metrics and /ui
(apps/operator_api.py).
"""

import time

from ryu.base import app_manager
from ryu.controller import event, ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from ryu.ofproto import ofproto_v1_3

from apps.arp_responder import arp_reply
from apps.operator_api import OperatorRestApi
from apps.rest_json import (METRICS_KEY, RequestError, RestApi, answer, counted_route,
                            json_response, read_json_body)
from apps.services import CONTEXT_KEY, contexts, start_timers
from syncfabric.decisions.fabric_view import FabricError
from syncfabric.openflow import builders as of
from syncfabric.operator.heap import FREEZE_INTERVAL_S, HeapFreezer

STATS_INTERVAL_S = 1.0
REST_APP_KEY = "fabric_controller"


class EventFabricChanged(event.EventBase):
    """A new fabric description was adopted. `restored`: it is the one saved before a
    restart (the apps restore what they saved with it)."""

    def __init__(self, restored=False):
        super().__init__()
        self.restored = restored


class EventLinksChanged(event.EventBase):
    """The set of fabric links that are down changed, or a switch synced (what was kept
    from it while it was read, e.g. a tree's backup uplinks, can go there now)."""


class EventPollPortStats(event.EventBase):
    """Timer: ask every switch for its port counters."""


class EventFreezeHeap(event.EventBase):
    """Timer: keep the garbage collector's full collections short (syncfabric/operator/heap.py)."""


class FabricController(app_manager.RyuApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    _CONTEXTS = contexts()
    _EVENTS = [EventFabricChanged, EventLinksChanged]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        services = kwargs[CONTEXT_KEY]
        self.fabric, self.installer, self.store = services.fabric, services.installer, services.store
        kwargs["wsgi"].register(FabricRestApi, {REST_APP_KEY: self, METRICS_KEY: services.metrics})
        kwargs["wsgi"].register(OperatorRestApi, {METRICS_KEY: services.metrics})

    def start(self):
        """Load the description saved before a restart, once every app listens for events."""
        super().start()
        self.heap = HeapFreezer()   # the process's, so only a running controller's
        start_timers(self, {EventPollPortStats: STATS_INTERVAL_S,
                            EventFreezeHeap: FREEZE_INTERVAL_S})
        description = self.store.load("fabric")
        if description is not None:
            try:
                self.load_fabric(description, restored=True)
            except FabricError as error:
                self.logger.error("saved fabric description unusable (%s); waiting for "
                                  "PUT /fabric/topology", error)

    def load_fabric(self, description, restored=False):
        """Adopt a new description (FabricError if invalid; then nothing changes)."""
        readings = self.fabric.load(description, time.monotonic(), restored)
        if not restored:
            self.store.save("fabric", description)
        self.send_event_to_observers(EventFabricChanged(restored))
        for datapath, requests in readings.items():
            self._read(datapath, requests)

    @staticmethod
    def _read(datapath, requests):
        for request in requests:
            datapath.send_msg(request)

    def _contents(self, msg, kind):
        """A reply to a switch's reading; once all are in, reconcile it (or read again)."""
        datapath = msg.datapath
        more = bool(msg.flags & datapath.ofproto.OFPMPF_REPLY_MORE)
        if not self.fabric.contents_part(datapath, kind, msg.body, more, msg.xid):
            return
        messages = self.fabric.reconcile(datapath)
        if messages is None:
            self._read(datapath, self.fabric.read(datapath))
        else:
            self.installer.send({datapath: messages},
                                on_done=lambda batch: self._reconciled(datapath, batch))

    def _reconciled(self, datapath, batch):
        if self.fabric.switch_confirmed(datapath, batch) is not None:
            self._links_changed(switch_synced=True)

    def _links_changed(self, switch_synced=False):
        changed, route_changes = self.fabric.recompute_links(time.monotonic())
        if route_changes:
            self.installer.send(route_changes)
        if changed or switch_synced:
            self.send_event_to_observers(EventLinksChanged())

    # --- OpenFlow events ----------------------------------------------------

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _switch_features(self, ev):
        requests = self.fabric.switch_connected(ev.msg.datapath)
        if requests:
            self._read(ev.msg.datapath, requests)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def _flows_read(self, ev):
        self._contents(ev.msg, "flows")

    @set_ev_cls(ofp_event.EventOFPGroupDescStatsReply, MAIN_DISPATCHER)
    def _groups_read(self, ev):
        self._contents(ev.msg, "groups")

    @set_ev_cls(ofp_event.EventOFPMeterConfigStatsReply, MAIN_DISPATCHER)
    def _meters_read(self, ev):
        self._contents(ev.msg, "meters")

    @set_ev_cls(ofp_event.EventOFPStateChange, DEAD_DISPATCHER)
    def _switch_gone(self, ev):
        if self.fabric.switch_gone(ev.datapath, time.monotonic()):
            self.installer.switch_gone(ev.datapath.id)
            self._links_changed()

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev):
        msg = ev.msg
        ofproto = msg.datapath.ofproto
        down = bool(msg.reason == ofproto.OFPPR_DELETE or msg.desc.state & ofproto.OFPPS_LINK_DOWN
                    or msg.desc.config & ofproto.OFPPC_PORT_DOWN)
        if self.fabric.port_status(msg.datapath.id, msg.desc.port_no, down):
            self._links_changed()

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier_reply(self, ev):
        self.installer.barrier_reply(ev.msg)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev):
        msg = ev.msg
        self.installer.error(msg)
        self.logger.error("dpid %#x rejected message xid %d: type=%d code=%d",
                          msg.datapath.id, msg.xid, msg.type, msg.code)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def _packet_in(self, ev):
        msg = ev.msg
        reply = arp_reply(self.fabric.view, msg.data) if self.fabric.view else None
        if reply is not None:
            msg.datapath.send_msg(of.packet_out(msg.datapath, msg.match["in_port"], reply))

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    def _port_stats(self, ev):
        max_port = ev.msg.datapath.ofproto.OFPP_MAX
        self.fabric.rates.update_ports(ev.msg.datapath.id, [
            (s.port_no, s.tx_bytes, s.rx_bytes, s.duration_sec + s.duration_nsec * 1e-9)
            for s in ev.msg.body if s.port_no <= max_port])

    @set_ev_cls(EventFreezeHeap)
    def _freeze_heap(self, _ev):
        self.heap.tick()

    @set_ev_cls(EventPollPortStats)
    def _poll_port_stats(self, _ev):
        for datapath in self.fabric.connected():
            datapath.send_msg(of.port_stats_request(datapath))
        self._links_changed()   # a switch that never connected counts as down after a grace


class FabricRestApi(RestApi):
    """GET/PUT /fabric/topology and GET /fabric/links."""

    def __init__(self, req, link, data, **config):
        super().__init__(req, link, data, **config)
        self.app = data[REST_APP_KEY]

    @counted_route("fabric", "/fabric/topology", methods=["GET"])
    def get_topology(self, req, **_kwargs):
        return json_response(self.app.fabric.topology_report())

    @counted_route("fabric", "/fabric/topology", methods=["PUT"])
    def put_topology(self, req, **_kwargs):
        def load():
            try:
                self.app.load_fabric(read_json_body(req))
            except FabricError as error:
                raise RequestError(400, "invalid fabric description: %s" % error) from None
            return self.app.fabric.topology_report(), 200
        return answer(req, load)

    @counted_route("fabric", "/fabric/links", methods=["GET"])
    def get_links(self, req, **_kwargs):
        return json_response({"interval_s": STATS_INTERVAL_S,
                              "links": self.app.fabric.link_states()})


if __name__ not in ("apps.fabric_controller", "__main__"):   # ryu-manager apps/fabric_controller.py
    from apps.launch_by_path import stand_in
    stand_in(globals())
