"""INA app: routes REST calls and fabric events to the plans service
(syncfabric/services/ina_plans.py) and sends what it returns.

    ryu-manager apps.ina_controller       # loads apps.fabric_controller too

Workers address their aggregator (or the PS) directly; the plan's flows choose the path
and its meters hold each stream to its rate. An aggregator forwards one aggregate to
the PS. A plan that crosses a failed link is moved (syncfabric/services/plan_moves.py); with a state
directory, plans survive a restart. REST: POST /ina/plans, GET /ina/plans,
GET/DELETE /ina/plans/<id>. Errors: 400 malformed or invalid, 404 unknown host or
plan, 409 no capacity left for the plan, 503 fabric not ready, 500 a switch rejected
the plan. Every DROPS_INTERVAL_S it counts what the switches' admission dropped
(syncfabric/services/admission_drops.py) and each traffic class's bytes where streams
enter the fabric (syncfabric/services/class_counters.py).
"""

import time

from ryu.base import app_manager
from ryu.controller import event, ofp_event
from ryu.controller.handler import MAIN_DISPATCHER, set_ev_cls

from apps.fabric_controller import EventFabricChanged, EventLinksChanged
from apps.rest_json import METRICS_KEY, resource_api
from apps.services import CONTEXT_KEY, contexts, start_timers
from syncfabric.services.admission_drops import AdmissionDrops
from syncfabric.services.class_counters import ClassCounters
from syncfabric.services.plan_moves import move_broken, recheck_waiting

REST_APP_KEY = "ina_plans"
WAITING_CHECK_INTERVAL_S = 0.5
DROPS_INTERVAL_S = 2.0
InaRestApi = resource_api("ina", "plans", REST_APP_KEY)
# ryu-manager loads these too (ryu reads the list from the module, not the class)
_REQUIRED_APP = ["apps.fabric_controller"]


class EventRecheckPlans(event.EventBase):
    """Timer: decide again the plans that waited for a switch to come back."""


class EventCountDrops(event.EventBase):
    """Timer: ask the switches how many datagrams their admission dropped, and how many
    bytes entered each traffic class."""


class InaController(app_manager.RyuApp):
    _CONTEXTS = contexts()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        services = kwargs[CONTEXT_KEY]
        self.plans = services.plans
        self.drops = AdmissionDrops(services.fabric, services.metrics)
        self.classes = ClassCounters(services.fabric, services.metrics)
        services.fabric.add_share_provider(self.plans.switch_share)
        kwargs["wsgi"].register(InaRestApi, {REST_APP_KEY: self.plans, METRICS_KEY: services.metrics})

    def start(self):
        super().start()
        start_timers(self, {EventRecheckPlans: WAITING_CHECK_INTERVAL_S,
                            EventCountDrops: DROPS_INTERVAL_S})

    @set_ev_cls(EventRecheckPlans)
    def _recheck_plans(self, _ev):
        recheck_waiting(self.plans, time.monotonic())

    @set_ev_cls(EventCountDrops)
    def _count_drops(self, _ev):
        for counter in (self.drops, self.classes):
            for datapath, requests in counter.requests().items():
                for request in requests:
                    datapath.send_msg(request)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def _drop_counts(self, ev):
        msg = ev.msg
        more = bool(msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE)
        self.drops.reply(msg.datapath, msg.xid, msg.body, more)
        self.classes.flows_reply(msg.datapath, msg.xid, msg.body, more)

    @set_ev_cls(ofp_event.EventOFPMeterStatsReply, MAIN_DISPATCHER)
    def _meter_counts(self, ev):
        msg = ev.msg
        self.classes.meters_reply(msg.datapath, msg.xid, msg.body,
                                  bool(msg.flags & msg.datapath.ofproto.OFPMPF_REPLY_MORE))

    @set_ev_cls(EventFabricChanged)
    def _fabric_changed(self, ev):
        self.plans.fabric_changed(ev.restored)

    @set_ev_cls(EventLinksChanged)
    def _links_changed(self, _ev):
        move_broken(self.plans, time.monotonic())


if __name__ not in ("apps.ina_controller", "__main__"):   # ryu-manager apps/ina_controller.py
    from apps.launch_by_path import stand_in
    stand_in(globals())
