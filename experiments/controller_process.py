"""ryu-manager as the experiments run it, in one place: the testbed (experiments/testbed.py),
the namespace fabric (experiments/namespace_fabric.py) and the hub benchmark
(experiments/hub_responsiveness.py) start, wait for, kill and stop the controller here.

    controller = ControllerProcess(["apps.job_controller"], of_port=6653, rest_port=8080)
    controller.start()                 # returns once its REST API answers
    controller.client.get("/jobs")     # the client sends the controller's token
    controller.stop()

Each controller gets a fresh REST token (SYNCFABRIC_REST_TOKEN, apps/rest_json.py), so its
API may listen beyond loopback, where the hosts reach it; the programs started in hosts
need the same token in their environment (`token`). Its output goes to a log file, and
a start that fails says the log's last line.
"""

import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from experiments.fidelity import process_cpu_seconds
from mininet_topos.ovs_state import PlatformError
from syncfabric.hosts.transport.controller_client import TOKEN_ENV, ControllerClient

# every app ryu-manager may load for the experiments (apps/)
ALL_APPS = ("apps.fabric_controller", "apps.multicast_controller", "apps.selmcast_controller",
            "apps.ina_controller", "apps.job_controller")
STOP_TIMEOUT_S = 10


def ryu_manager_command():
    """The ryu-manager beside this Python (the venv's), else the one on the PATH."""
    beside_python = Path(sys.executable).parent / "ryu-manager"
    return str(beside_python) if beside_python.exists() else "ryu-manager"


def wait_until(condition, timeout_s, what, poll_s=0.25):
    """Poll condition() until it is true; PlatformError naming `what` after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise PlatformError("timed out after %.0f s waiting for %s" % (timeout_s, what))
        time.sleep(poll_s)


class ControllerProcess:
    """One ryu-manager with `apps` on `of_port` (OpenFlow, loopback) and `rest_port` (REST,
    every interface). env: more of its environment (a state directory, a repair
    mode); client_timeout_s: how long its client waits for an answer."""

    def __init__(self, apps, of_port, rest_port, log_path=None, env=None,
                 ready_timeout_s=60.0, client_timeout_s=None):
        self.apps, self.of_port, self.rest_port = tuple(apps), of_port, rest_port
        self.log_path = log_path or tempfile.mkstemp(prefix="syncfabric-ryu-", suffix=".log")[1]
        self.env = dict(env or {})
        self.ready_timeout_s = ready_timeout_s
        self.token = secrets.token_urlsafe(16)
        options = {} if client_timeout_s is None else {"timeout_s": client_timeout_s}
        self.client = ControllerClient("http://127.0.0.1:%d" % rest_port, token=self.token,
                                       **options)
        self.process = None

    def command(self):
        return [ryu_manager_command(), "--ofp-listen-host", "127.0.0.1",
                "--ofp-tcp-listen-port", str(self.of_port), "--wsapi-host", "0.0.0.0",
                "--wsapi-port", str(self.rest_port), *self.apps]

    def start(self, mode="w"):
        """Start it (its log opened with `mode`: "a" to keep an earlier run's) and return
        once its REST API answers; PlatformError if it exits or does not answer."""
        with open(self.log_path, mode) as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env=dict(os.environ, **self.env, **{TOKEN_ENV: self.token}))
        wait_until(self.answers, self.ready_timeout_s,
                   "the controller's REST API to answer (controller log: %s)" % self.log_path)

    def answers(self):
        """Whether its REST API answers; PlatformError with its log's last line if it
        has exited."""
        if self.process.poll() is not None:
            lines = self.log().strip().splitlines() or ["(no output)"]
            raise PlatformError("ryu-manager exited with %d: %s"
                                % (self.process.returncode, lines[-1]))
        try:
            self.client.get("/fabric/topology")
            return True
        except OSError:
            return False

    def running(self):
        return self.process is not None and self.process.poll() is None

    def cpu_seconds(self):
        """The CPU time (user and system) it has taken since it started; None if it is
        not running."""
        if not self.running():
            return None
        return process_cpu_seconds(self.process.pid)

    def kill(self):
        """Kill it: no goodbye to the switches, which keep their tables."""
        self.process.kill()
        self.process.wait()

    def stop(self):
        """Terminate it (killed if it does not end within STOP_TIMEOUT_S); idempotent."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
        self.process = None

    def log(self):
        """Its log so far, undecodable bytes replaced (it is only read)."""
        return Path(self.log_path).read_text(errors="replace")
