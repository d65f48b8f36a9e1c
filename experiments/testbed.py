"""A testbed: ryu-manager running our apps plus a Mininet fabric, up and down together.

    with FabricTestbed(SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=1, bw=20)) as bed:
        bed.net.pingAll()
        bed.client.get("/fabric/links")

The controller (experiments/controller_process.py) runs with a fresh REST token
(SYNCFABRIC_REST_TOKEN, apps/rest_json.py); the testbed sets it in its own environment
too, so its client and the programs it starts in hosts send it. It also gets a fresh
state directory (syncfabric/services/state_files.py), so restart_controller() restarts
it with its memory, unless told to forget.

Start-up checks root, OVS, leftover bridges (OVS and management) and both ports first
and fails with a one-line PlatformError (only then does it report progress); whatever
had started by a failure is torn down again, so nothing (bridges, hosts, controller) is
left behind.
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from experiments import switch_oracle
from experiments.controller_process import ALL_APPS, ControllerProcess, wait_until
from experiments.fidelity import PlatformSampler
from experiments.ovs import ofctl, port_bytes
from mininet_topos.class_sizer import ClassSizer
from mininet_topos.data_plane import DataPlane, apply_ovs_receive_buffer, apply_ovs_send_buffer
from mininet_topos.description import describe
from mininet_topos.ovs_state import check_ovs_running
from mininet_topos.platform_net import (PlatformError, add_management_network, check_bridges_free,
                                        check_management_network_free,
                                        remove_management_network,
                                        shaped_switch_port_numbers, start_network,
                                        switch_ports, tc_batch)
from syncfabric.hosts.transport.controller_client import TOKEN_ENV
from syncfabric.hosts.packets.wire import MTU_ENV
from syncfabric.services.state_files import STATE_DIR_ENV

DEFAULT_OF_PORT = 6653
DEFAULT_REST_PORT = 8080


def check_port_free(port, purpose):
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind(("0.0.0.0", port))
    except OSError:
        raise PlatformError("%s port %d is already in use (another controller running?)"
                            % (purpose, port)) from None
    finally:
        probe.close()


class FabricTestbed:
    def __init__(self, topo, apps=ALL_APPS, of_port=DEFAULT_OF_PORT,
                 rest_port=DEFAULT_REST_PORT, log_path=None, ready_timeout_s=60.0,
                 progress=lambda step: None, data_plane=DataPlane(), controller_env=None):
        self.topo = topo
        self.data_plane = data_plane
        self.progress = progress
        self.of_port = of_port
        self.rest_port = rest_port
        self.ready_timeout_s = ready_timeout_s
        # controller_env: e.g. SYNCFABRIC_LOCAL_REPAIR; start() adds the state directory
        self.controller = ControllerProcess(apps, of_port, rest_port, log_path, controller_env,
                                            ready_timeout_s)
        self.log_path, self.token = self.controller.log_path, self.controller.token
        self.client = self.controller.client
        self.state_dir = None
        self.net = None
        self.management_ip = None   # the root namespace as seen from inside hosts
        self.management_url = None  # the REST API as seen from inside hosts
        self.class_sizer = None     # with traffic classes: sizes them to the booked floors
        self._saved_environment = None   # what start() found, put back by stop()
        self._previous_sigterm = None    # the handler start() replaced, put back by stop()

    def __enter__(self):
        self.start()
        return self

    def _stop_on_sigterm(self):
        """SIGTERM (a `timeout`, a cancelled CI job) ends the run as Ctrl-C does: by an
        exception, so that stop() tears the fabric and controller down. Signals reach
        the main thread only; elsewhere nothing changes."""
        if threading.current_thread() is not threading.main_thread():
            return

        def terminate(signal_number, _frame):
            raise SystemExit(128 + signal_number)
        self._previous_sigterm = signal.signal(signal.SIGTERM, terminate)

    def __exit__(self, *_exc):
        self.stop()

    def start(self):
        if os.geteuid() != 0:
            raise PlatformError("Mininet needs root")
        check_ovs_running()
        port_queue = self.data_plane.port_queue(switch_ports(self.topo))
        if port_queue < self.data_plane.switch_queue:
            self.progress("switch ports queue %d frames, not %d: what OVS's send buffer holds "
                          "for this fabric" % (port_queue, self.data_plane.switch_queue))
        if apply_ovs_send_buffer(self.data_plane.ovs_send_buffer):
            self.progress("restarted Open vSwitch for its transmit socket's buffer (%s)"
                          % self.data_plane.describe())
        check_bridges_free(self.topo)
        check_management_network_free()
        check_port_free(self.of_port, "OpenFlow")
        check_port_free(self.rest_port, "REST")
        self._stop_on_sigterm()
        self._saved_environment = {name: os.environ.get(name) for name in (TOKEN_ENV, MTU_ENV)}
        self.state_dir = Path(tempfile.mkdtemp(prefix="syncfabric-state-"))
        self.controller.env[STATE_DIR_ENV] = str(self.state_dir)
        os.environ[TOKEN_ENV] = self.token   # for the programs started in hosts
        try:
            self.progress("starting ryu-manager (%s), log in %s"
                          % (" ".join(self.controller.apps), self.log_path))
            self.controller.start()
            self.progress("building the fabric: %d switches, %d hosts"
                          % (len(self.topo.switches()), len(self.topo.hosts())))
            apply_ovs_receive_buffer(self.data_plane.ovs_receive_buffer)
            self.net = start_network(self.topo, self.of_port, mtu=self.data_plane.mtu,
                                     port_queue=port_queue,
                                     traffic_classes=self.data_plane.traffic_classes)
            os.environ[MTU_ENV] = str(self.data_plane.mtu)   # for the programs started in hosts
            self.management_ip = add_management_network(self.net)
            self.management_url = "http://%s:%d" % (self.management_ip, self.rest_port)
            self.client.put("/fabric/topology", describe(self.topo))
            self.progress("waiting for every switch to connect and confirm its flows")
            self._wait_until_synced()
            if self.data_plane.traffic_classes:
                self.class_sizer = ClassSizer(
                    shaped_switch_port_numbers(self.net),
                    lambda: self.client.get("/fabric/links")["links"], tc_batch).start()
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if self.class_sizer is not None:
            self.class_sizer.stop()
            self.class_sizer = None
        if self.net is not None:
            self.net.stop()
            self.net = None
            remove_management_network()
        self.controller.stop()
        if self.state_dir is not None:
            shutil.rmtree(self.state_dir, ignore_errors=True)
            self.state_dir = None
        for name, value in (self._saved_environment or {}).items():
            # the token and MTU were for this testbed's programs: later ones start clean
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved_environment = None
        if self._previous_sigterm is not None:
            signal.signal(signal.SIGTERM, self._previous_sigterm)
            self._previous_sigterm = None

    def host(self, name):
        """The Mininet host, for what only Mininet offers (cmd, iperf)."""
        return self.net.get(name)

    # the hosts interface that experiments' drivers use (experiments/traffic/launch.py)

    def address(self, name):
        """The host's data-plane IP."""
        return self.net.get(name).IP()

    def interface(self, name):
        """The name of the host's data-plane interface."""
        return self.net.get(name).defaultIntf().name

    def switch_port_bytes(self, name):
        """(bytes received, bytes sent) at the switch port of the host's data-plane link:
        what the host sent, and what it was sent."""
        link = self.net.get(name).defaultIntf().link
        switch_side = link.intf2 if link.intf1.node.name == name else link.intf1
        return port_bytes(switch_side.node.name, switch_side.name)

    def popen(self, name, command, **popen_arguments):
        """A process running `command` in the host (subprocess.Popen's arguments)."""
        return self.net.get(name).popen(command, **popen_arguments)

    def kill_controller(self):
        """Kill ryu-manager: no goodbye to the switches, which keep their tables."""
        self.controller.kill()

    def restart_controller(self, forget=False, away_s=0.0):
        """Kill ryu-manager (unless killed already) and start it again away_s later with
        the same apps and ports; it restores the fabric and its trees from the state
        directory, or with forget starts without them (and gets the fabric by PUT).
        Returns once every switch is synced: {"answering_s", "synced_s"}, when its REST
        API answered and every switch was synced, in seconds after it was killed."""
        killed = time.monotonic()
        if self.controller.running():
            self.kill_controller()
        if forget:
            for saved in self.state_dir.iterdir():
                saved.unlink()
        time.sleep(away_s)
        self.progress("restarting ryu-manager")
        self.controller.start(mode="a")
        answering = time.monotonic()
        if not self.client.get("/fabric/topology")["switches"]:
            self.client.put("/fabric/topology", describe(self.topo))
        self._wait_until_synced()
        return {"answering_s": answering - killed, "synced_s": time.monotonic() - killed}

    def reconnect_switch(self, switch, restart=False, away_s=0.0):
        """Make `switch` drop its OpenFlow connection and connect again, its tables
        intact; with restart, it is away for away_s and loses every flow, group and
        meter meanwhile, as a restarted switch does (removing a fail-secure bridge's
        controller clears its tables anyway)."""
        if not restart:
            subprocess.run(["ovs-appctl", "bridge/reconnect", switch], check=True,
                           capture_output=True)
            return
        target = subprocess.run(["ovs-vsctl", "get-controller", switch], capture_output=True,
                                text=True, check=True).stdout.split()
        subprocess.run(["ovs-vsctl", "del-controller", switch], check=True)
        for command in ("del-flows", "del-groups", "del-meters"):
            ofctl(command, switch)
        time.sleep(away_s)
        subprocess.run(["ovs-vsctl", "set-controller", switch, *target], check=True)

    def leftovers(self):
        """{switch: [group, meter, multicast-flow and steering-flow lines]} for switches that
        hold any: empty once every tree and plan is released."""
        return switch_oracle.leftovers(self.topo.switches())

    def sampler(self):
        """A PlatformSampler over this fabric: start() before a run, stop() after it."""
        return PlatformSampler(self.net.hosts)

    def controller_log(self):
        return self.controller.log()

    def _wait_until_synced(self):
        def all_synced():
            switches = self.client.get("/fabric/topology")["switches"]
            return switches and all(s["synced"] for s in switches)
        self._wait_for(all_synced, "every switch to connect and confirm its flows")

    def _wait_for(self, condition, what):
        wait_until(condition, self.ready_timeout_s,
                   "%s (controller log: %s)" % (what, self.log_path))
