"""Multicast app: routes REST calls, fabric events and the lease timer to the trees
service (syncfabric/services/trees.py) and sends what it returns.

    ryu-manager apps.multicast_controller       # loads apps.fabric_controller too

REST: POST /multicast/trees, GET /multicast/trees, GET/DELETE /multicast/trees/<id>.
Errors: 400 malformed or invalid, 404 unknown host or tree, 409 infeasible (with
max_feasible_mbps), 503 fabric not ready, 500 a switch rejected the tree.
"""

import time

from ryu.base import app_manager
from ryu.controller import event
from ryu.controller.handler import set_ev_cls

from apps.fabric_controller import EventFabricChanged, EventLinksChanged
from apps.rest_json import METRICS_KEY, resource_api
from apps.services import CONTEXT_KEY, contexts, start_timers
from syncfabric.services.tree_moves import reroute_broken

LEASE_CHECK_INTERVAL_S = 0.5
REST_APP_KEY = "multicast_trees"
MulticastRestApi = resource_api("multicast", "trees", REST_APP_KEY)
# ryu-manager loads these too (ryu reads the list from the module, not the class)
_REQUIRED_APP = ["apps.fabric_controller"]


class EventExpireLeases(event.EventBase):
    """Timer: release the trees whose lease ran out."""


class MulticastController(app_manager.RyuApp):
    _CONTEXTS = contexts()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        services = kwargs[CONTEXT_KEY]
        self.trees = services.trees
        services.fabric.add_share_provider(self.trees.switch_share)
        kwargs["wsgi"].register(MulticastRestApi, {REST_APP_KEY: self.trees,
                                                    METRICS_KEY: services.metrics})

    def start(self):
        super().start()
        start_timers(self, {EventExpireLeases: LEASE_CHECK_INTERVAL_S})

    @set_ev_cls(EventExpireLeases)
    def _expire_leases(self, _ev):
        self.trees.expire_leases(time.monotonic())

    @set_ev_cls(EventFabricChanged)
    def _fabric_changed(self, ev):
        self.trees.fabric_changed(ev.restored, time.monotonic())

    @set_ev_cls(EventLinksChanged)
    def _links_changed(self, _ev):
        reroute_broken(self.trees, time.monotonic())


if __name__ not in ("apps.multicast_controller", "__main__"):   # ryu-manager apps/multicast_controller.py
    from apps.launch_by_path import stand_in
    stand_in(globals())
