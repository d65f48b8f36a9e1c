"""SELMCAST app: routes REST calls to the rounds service (syncfabric/services/selmcast_rounds.py),
which installs each round's trees through the trees service.

    ryu-manager apps.selmcast_controller      # loads apps.multicast_controller and the fabric app

REST: POST /selmcast/rounds, GET /selmcast/rounds, GET/DELETE /selmcast/rounds/<id>.
Errors as the multicast API: 400 malformed or invalid, 404 unknown host or round, 409
no bandwidth (with the tree's max_feasible_mbps), 503 fabric not ready, 500 a switch
rejected a tree; none leaves a tree, reservation or history entry behind. A round's
trees move around failed links with every other tree; a round that loses one (no tree
fit around a fault) is released whole on the next FOLLOW_INTERVAL_S. With a state
directory, rounds and jobs' histories survive a restart.
"""

import time

from ryu.base import app_manager
from ryu.controller import event
from ryu.controller.handler import set_ev_cls

from apps.fabric_controller import EventFabricChanged
from apps.rest_json import METRICS_KEY, resource_api
from apps.services import CONTEXT_KEY, contexts, start_timers

REST_APP_KEY = "selmcast_rounds"
FOLLOW_INTERVAL_S = 0.5
SelmcastRestApi = resource_api("selmcast", "rounds", REST_APP_KEY)
# ryu-manager loads these too (ryu reads the list from the module, not the class)
_REQUIRED_APP = ["apps.multicast_controller"]


class EventFollowRounds(event.EventBase):
    """Timer: release the rounds that lost a tree."""


class SelmcastController(app_manager.RyuApp):
    _CONTEXTS = contexts()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        services = kwargs[CONTEXT_KEY]
        self.rounds = services.rounds
        kwargs["wsgi"].register(SelmcastRestApi, {REST_APP_KEY: services.rounds,
                                                  METRICS_KEY: services.metrics})

    def start(self):
        super().start()
        start_timers(self, {EventFollowRounds: FOLLOW_INTERVAL_S})

    @set_ev_cls(EventFollowRounds)
    def _follow(self, _ev):
        self.rounds.follow(time.monotonic())

    @set_ev_cls(EventFabricChanged)
    def _fabric_changed(self, ev):
        self.rounds.fabric_changed(ev.restored)


if __name__ not in ("apps.selmcast_controller", "__main__"):   # ryu-manager apps/selmcast_controller.py
    from apps.launch_by_path import stand_in
    stand_in(globals())
