"""ryu-manager's apps in-process, on fake switches: the real apps, services and installer,
Ryu's app manager and event loops, a WSGIApplication answering REST requests (as Ryu's
tests/unit/app/test_ofctl_rest.py does), and FakeDatapaths instead of Open vSwitch."""

import json
import time
from types import SimpleNamespace

from ryu.app.wsgi import WSGIApplication
from ryu.base import app_manager
from ryu.controller import ofp_event
from ryu.controller.handler import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER
from ryu.lib import hub
from webob import Request

from apps.fabric_controller import EventPollPortStats, FabricController
from apps.ina_controller import InaController
from apps.job_controller import JobController
from apps.multicast_controller import MulticastController
from apps.selmcast_controller import SelmcastController
from apps.services import CONTEXT_KEY, Services
from mininet_topos.description import describe
from mininet_topos.spineleaf import SpineLeafTopo
from tests.harness.fake_openflow import FakeDatapath, FakeNetwork

ALL_APPS = (FabricController, MulticastController, SelmcastController, InaController,
            JobController)


def description(spines=2, leaves=2, hosts_per_leaf=2, aggregator_bw=9):
    """A spine-leaf fabric of 20 Mbit/s links with an aggregator on each spine (9 Mbit/s)."""
    return describe(SpineLeafTopo(spines=spines, leaves=leaves, hosts_per_leaf=hosts_per_leaf,
                                  bw=20, aggregators="spines", aggregator_bw=aggregator_bw))


class MemoryStore:
    """state_files' interface, in memory: what a state directory would hold."""

    def __init__(self, saved=None):
        self.saved = dict(saved or {})

    def load(self, name):
        return json.loads(json.dumps(self.saved[name])) if name in self.saved else None

    def save(self, name, data):
        self.saved[name] = json.loads(json.dumps(data))


class InProcessController:
    def __init__(self, description=None, store=None, confirm_timeout_s=0.5, apps=ALL_APPS):
        self.services = Services(store=store or MemoryStore(), confirm_timeout_s=confirm_timeout_s)
        self.network = FakeNetwork(self.services.installer, self._reply)
        self.wsgi = WSGIApplication()
        self.manager = app_manager.AppManager()
        self.manager.applications_cls = {cls.__module__: cls for cls in apps}
        self.manager.instantiate_apps(wsgi=self.wsgi, **{CONTEXT_KEY: self.services})
        self.fabric_app = app_manager.lookup_service_brick("FabricController")
        self.switches = {}   # name -> FakeDatapath
        if description is not None:
            status, body = self.request("PUT", "/fabric/topology", description)
            if status != 200:
                self.close()   # else the next controller finds these apps still registered
                raise AssertionError(body)
            self.connect_all()

    @property
    def view(self):
        return self.services.fabric.view

    def close(self):
        self.manager.close()
        self.network.close()

    # --- REST -------------------------------------------------------------------

    def request(self, method, path, body=None, headers=None, remote_addr="127.0.0.1"):
        """(status, JSON answer) of one REST request (from loopback unless remote_addr)."""
        response = self.response(method, path, body, headers, remote_addr)
        return response.status_int, json.loads(response.body or b"null")

    def response(self, method, path, body=None, headers=None, remote_addr="127.0.0.1"):
        """The WebOb response to one REST request, once the controller settled."""
        request = Request.blank(path, method=method, headers=headers or {},
                                remote_addr=remote_addr)
        if body is not None:
            request.body = body if isinstance(body, bytes) else json.dumps(body).encode()
        response = request.get_response(self.wsgi)
        self.settle()
        return response

    # --- switches ---------------------------------------------------------------

    def _event(self, event, dispatcher):
        self.fabric_app.send_event(self.fabric_app.name, event, dispatcher)

    def _reply(self, message):
        """A switch's multipart reply, as Ryu's connection thread delivers it: to every
        app that handles it."""
        event_class = getattr(ofp_event, "Event" + type(message).__name__)
        for app in list(app_manager.SERVICE_BRICKS.values()):
            if event_class in app.event_handlers:
                app.send_event(app.name, event_class(message), MAIN_DISPATCHER)

    def connect(self, switch, keep_table=False, settle=True, table=None):
        """A switch of the fabric connects (again): a fresh FakeDatapath, with an empty
        table, (keep_table) the one it had, as after a reconnection, or `table`, the one
        it kept while another controller was killed and this one started; with settle
        False, return at once (from inside the controller, while it works)."""
        datapath = FakeDatapath(self.view.dpid(switch), self.network)
        if keep_table:
            datapath.table = self.switches[switch].table
        if table is not None:
            datapath.table = table
        self.switches[switch] = datapath
        self._event(ofp_event.EventOFPSwitchFeatures(SimpleNamespace(datapath=datapath)),
                    CONFIG_DISPATCHER)
        if settle:
            self.settle()
        return datapath

    def connect_all(self):
        for switch in self.view.switches:
            self.connect(switch)

    def poll_links(self, settle=True):
        """The fabric app's timer: port stats asked and links recomputed (with settle
        False, return at once: e.g. before a switch connect() left unsettled is read)."""
        self._event(EventPollPortStats(), None)
        if settle:
            self.settle()

    def disconnect(self, switch):
        self._event(ofp_event.EventOFPStateChange(self.switches[switch]), DEAD_DISPATCHER)
        self.settle()

    def port_down(self, switch, neighbour, down=True, settle=True):
        """The link from `switch` to `neighbour` goes down (or up again): both tables see
        it at once (FAST_FAILOVER groups act on it), and `switch` reports it (with settle
        False, return at once, as connect)."""
        self.link_down(switch, neighbour, down)
        datapath = self.switches[switch]
        ofproto = datapath.ofproto
        desc = SimpleNamespace(port_no=self.view.out_port(switch, neighbour),
                               state=ofproto.OFPPS_LINK_DOWN if down else 0, config=0)
        message = SimpleNamespace(datapath=datapath, reason=ofproto.OFPPR_MODIFY, desc=desc)
        self._event(ofp_event.EventOFPPortStatus(message), MAIN_DISPATCHER)
        if settle:
            self.settle()

    def link_down(self, switch, neighbour, down=True):
        """The data plane only: the link's ports go down (or up), nobody reports it yet."""
        for tail, head in ((switch, neighbour), (neighbour, switch)):
            ports = self.switches[tail].table.down_ports
            (ports.add if down else ports.discard)(self.view.out_port(tail, head))

    def tables(self):
        return {name: datapath.table for name, datapath in self.switches.items()}

    def state(self):
        """{switch: its table's flows, groups and meters}, without the fabric's flows."""
        return {name: {k: v for k, v in datapath.table.state().items() if k != "flows"}
                | {"flows": [f for f in datapath.table.state()["flows"]
                             if f[1] >> 32 != 0x5346_0000]}
                for name, datapath in self.switches.items()}

    def settle_until(self, condition, timeout_s=10.0):
        """Settle until condition() holds: an app's event handler that waits for planning
        off the event loop is not seen by settle()."""
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert time.monotonic() < deadline, "the controller did not get there"
            self.settle()

    def settle(self, timeout_s=5.0):
        """Wait until every app's events are handled and every batch is answered."""
        deadline = time.monotonic() + timeout_s
        quiet = 0
        while quiet < 3:
            hub.sleep(0.005)
            busy = (any(not app.events.empty() for app in self.manager.applications.values())
                    or self.services.installer.pending() or not self.network.quiet())
            quiet = 0 if busy else quiet + 1
            assert time.monotonic() < deadline, "the controller did not settle"


def restarted(saved, tables):
    """A new controller on what a first one saved (its store's `saved`), its switches
    connecting with the tables they kept ({switch: table}), its jobs taken back (the
    job app's timer, once); closed by the caller."""
    controller = InProcessController(store=MemoryStore(saved))
    for switch in controller.view.switches:
        controller.connect(switch, table=tables[switch])
    controller.services.jobs.follow(time.monotonic())
    controller.settle()
    return controller


def job_across_a_restart(body):
    """The report of a job made from `body` on a controller, before and after the next
    controller takes it back (restarted()), each without expires_in_s (the lease runs on)."""
    first = InProcessController(description())
    try:
        code, job = first.request("POST", "/jobs", body)
        assert code == 201, job
        before = first.request("GET", "/jobs/%d" % job["id"])[1]
        saved, tables = first.services.store.saved, first.tables()
    finally:
        first.close()
    again = restarted(saved, tables)
    try:
        after = again.request("GET", "/jobs/%d" % job["id"])[1]
    finally:
        again.close()
    return [{k: v for k, v in report.items() if k != "expires_in_s"} for report in (before, after)]


def connected(fabric):
    """A fixture's body: a controller on the description `fabric` with every switch
    connected, closed after the test."""
    controller = InProcessController(fabric)
    controller.connect_all()
    yield controller
    controller.close()
