"""The services of one controller process, built once and shared by its apps as the
Ryu context `syncfabric` (as `wsgi` is): each app routes events, REST calls and timers
to its own service, and the services meet only through narrow interfaces (the fabric's
book and switches, the trees service's create and release)."""

import os
import sys
import time

from eventlet import tpool
from ryu import cfg
from ryu.app.wsgi import WSGIApplication
from ryu.lib import hub

from apps.rest_json import check_listening
from apps.rest_tls import serve_tls_if_configured
from syncfabric.openflow.installer import CONFIRM_TIMEOUT_S, Installer
from syncfabric.operator.metrics import Metrics
from syncfabric.services.fabric import Fabric
from syncfabric.services.ina_plans import InaPlans
from syncfabric.services.jobs import Jobs
from syncfabric.services.selmcast_rounds import SelmcastRounds
from syncfabric.services.state_files import STATE_DIR_ENV, StateFiles
from syncfabric.services.trees import MulticastTrees

CONTEXT_KEY = "syncfabric"
GIL_SWITCH_INTERVAL_S = 0.0005
WAIT_INTERVAL_S = 0.1
LOCAL_REPAIR_ENV = "SYNCFABRIC_LOCAL_REPAIR"
if "state_dir" not in cfg.CONF:
    cfg.CONF.register_opt(cfg.StrOpt("state_dir", default=None,
                                     help="directory where the apps keep what survives a restart "
                                          "(or %s in the environment)" % STATE_DIR_ENV))
if "local_repair" not in cfg.CONF:
    cfg.CONF.register_opt(cfg.BoolOpt(
        "local_repair", default=True,
        help="give multicast trees backup uplinks that switches fail over to by themselves "
             "(FAST_FAILOVER groups) before the controller moves the tree (%s=0 turns it off)"
        % LOCAL_REPAIR_ENV))


def state_files():
    """The state directory is SYNCFABRIC_STATE_DIR in ryu-manager's environment, or
    `state_dir = ...` in a ryu-manager --config-file."""
    return StateFiles(os.environ.get(STATE_DIR_ENV) or cfg.CONF.state_dir)


def local_repair():
    setting = os.environ.get(LOCAL_REPAIR_ENV)
    return cfg.CONF.local_repair if setting is None else setting not in ("0", "false", "no")


class Services:
    def __init__(self, store=None, confirm_timeout_s=CONFIRM_TIMEOUT_S):
        check_listening()   # before any app registers a route
        serve_tls_if_configured()
        self.store = store = state_files() if store is None else store
        self.metrics = Metrics()
        self.installer = Installer(self.metrics, confirm_timeout_s, hub.Event, hub.sleep)
        self.fabric = Fabric(self.metrics, self.installer)
        self.trees = MulticastTrees(self.fabric, self.installer, store, self.metrics,
                                    local_repair=local_repair())
        # planning is pure and can take seconds: it runs in a native thread (eventlet's
        # tpool) while the hub keeps answering switches and REST calls. The planner holds
        # the GIL while it runs Python, and the hub waits up to one switch interval for it
        # at every blocking call it makes: Python's default 5 ms made a REST answer wait
        # up to 80 ms
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        self.rounds = SelmcastRounds(self.fabric, self.trees, store, self.metrics, tpool.execute)
        self.plans = InaPlans(self.fabric, self.installer, store, self.metrics, tpool.execute)
        self.jobs = Jobs(self.fabric, self.trees, self.plans, store, self.metrics, tpool.execute,
                         wait_until)
        self.metrics.watch(self)


def wait_until(condition, timeout_s):
    """Whether condition(now) came to hold within timeout_s, asked every WAIT_INTERVAL_S
    while the hub runs the rest (REST calls, switches)."""
    deadline = time.monotonic() + timeout_s
    while not condition(time.monotonic()):
        if time.monotonic() >= deadline:
            return False
        hub.sleep(WAIT_INTERVAL_S)
    return True


def contexts():
    """The _CONTEXTS of every syncfabric app."""
    return {"wsgi": WSGIApplication, CONTEXT_KEY: Services}


def start_timers(app, intervals):
    """Faucet's _VALVE_SERVICES: every interval_s, send the app an instance of the event
    class, so timed work runs in the app's one event loop with everything else. A timer
    ends at its first tick after the app stopped, sending nothing: the event goes by the
    app's name, which a newer app of the same name may hold by then."""
    def tick(event_class, interval_s):
        while True:
            hub.sleep(interval_s)
            if not app.is_active:
                return
            app.send_event(app.name, event_class())
    for event_class, interval_s in intervals.items():
        hub.spawn(tick, event_class, interval_s)
