"""Follow the deployment guide (docs/deploy.md) on one machine, command by command, and
check that a job's sums come back exact and that nothing is left.

    python -m experiments.deploy_check

It runs the guide's own commands (experiments/deploy_guide.py holds them, and a test
holds them equal to the guide's code blocks), printing each, on a 2x2 spine-leaf with
four hosts and an aggregator host on each spine. It substitutes only what one machine
cannot have, as the guide says: network namespaces for hosts, veth pairs for cables, a
Linux bridge for the management network, OVS's userspace datapath for switches, and a
temporary folder and this checkout's virtual environment for the guide's paths. The
daemons run their systemd unit's command line (docs/syncfabric-aggregator.service). It
names the guide's commands it does not run, and why. The guide's ports (6653, 8080)
must be free. Everything is removed at the end, also on failure, SIGTERM or Ctrl-C.
Needs root and a running Open vSwitch (`make ovs`).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from experiments import deploy_guide as guide
from experiments.defaults import (NAMESPACE_MANAGEMENT_BRIDGE, NAMESPACE_MANAGEMENT_PREFIX,
                                 NAMESPACE_PREFIX)
from experiments.namespace_fabric import (namespace_leftovers, remove_namespace_leftovers,
                                          stop_processes)
from experiments.switch_oracle import leftovers as switch_leftovers
from mininet_topos.ovs_state import check_ovs_running
from mininet_topos.platform_net import PlatformError, leftovers as bridge_leftovers
from mininet_topos.platform_net import remove_leftovers
from syncfabric.hosts.cli import ArgumentParser

CONTROLLER_IP = NAMESPACE_MANAGEMENT_PREFIX + ".1"
LINK_MBPS = 50
WAIT_S = 60


def deploy_fabric():
    """The fabric description the check deploys: 2 spines with an aggregator host each,
    2 leaves with 2 hosts each (h1..h4, the guide's smoke-test job's workers)."""
    switches = [{"name": "spine%d" % n, "dpid": 0x1000 + n, "role": "spine"} for n in (1, 2)]
    switches += [{"name": "leaf%d" % n, "dpid": 0x2000 + n, "role": "leaf"} for n in (1, 2)]
    links = [{"a": "leaf%d" % leaf, "a_port": spine, "b": "spine%d" % spine, "b_port": leaf,
              "capacity_mbps": LINK_MBPS} for leaf in (1, 2) for spine in (1, 2)]
    hosts = [{"name": "h%d" % n, "ip": "10.0.0.%d" % n, "mac": "02:00:00:00:00:%02x" % n,
              "switch": "leaf%d" % ((n + 1) // 2), "port": 3 + (n + 1) % 2,
              "capacity_mbps": LINK_MBPS} for n in (1, 2, 3, 4)]
    hosts += [{"name": "agg-spine%d" % n, "ip": "10.0.0.%d" % (100 + n),
               "mac": "02:00:00:00:01:%02x" % n, "switch": "spine%d" % n, "port": 3,
               "capacity_mbps": LINK_MBPS, "role": "aggregator",
               "aggregation_mbps": LINK_MBPS * 0.45} for n in (1, 2)]
    return {"switches": switches, "links": links, "hosts": hosts}


class Deployment:
    """One machine following the guide: what it started and built, removed by remove()."""

    def __init__(self, description, folder):
        self.description, self.folder = description, folder
        self.paths = {"/etc/syncfabric": os.path.join(folder, "etc"),
                      "/var/lib/syncfabric": os.path.join(folder, "state"),
                      "/opt/syncfabric/venv": sys.prefix}
        self.processes, self.commands_run = [], set()

    # --- running the guide's commands --------------------------------------------

    def command(self, template, host=None, **words):
        """The guide's command with its words filled in, in `host`'s namespace if given."""
        self.commands_run.add(template)
        command = guide.filled(template, dict(words, CONTROLLER=CONTROLLER_IP), self.paths)
        print("%s$ %s" % ("[%s] " % host if host else "", command), flush=True)
        return (["ip", "netns", "exec", NAMESPACE_PREFIX + host] if host else []) + \
            ["bash", "-c", command]

    def run(self, template, host=None, **words):
        """Run it and wait; its output, or RuntimeError with what it printed."""
        done = subprocess.run(self.command(template, host, **words), capture_output=True,
                              text=True, cwd=guide.ROOT)
        if done.returncode != 0:
            raise RuntimeError("the guide's command failed (%d): %s" % (
                done.returncode, (done.stderr or done.stdout).strip()[-600:]))
        return done.stdout

    def start(self, template, host=None, log=None, **words):
        """Start it (a server, a daemon, a worker) and keep it to stop at the end."""
        process = subprocess.Popen(self.command(template, host, **words), cwd=guide.ROOT,
                                   stdout=log or subprocess.PIPE, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, text=True, start_new_session=True)
        self.processes.append(process)
        return process

    @staticmethod
    def setup(command):
        """A substitution's own step (not the guide's): a namespace, a cable, an address."""
        subprocess.run(command, shell=True, check=True, capture_output=True, text=True)

    # --- the guide, section by section -------------------------------------------

    def controller(self):
        for template in (guide.CONF_FOLDER, guide.TOKEN, guide.CA, guide.CONTROLLER_REQUEST,
                         guide.CONTROLLER_NAME, guide.CONTROLLER_CERT):
            self.run(template)
        bridge = NAMESPACE_MANAGEMENT_BRIDGE   # the management network
        self.setup("ip link add %s type bridge && ip addr add %s/24 dev %s && ip link set %s up"
                   % (bridge, CONTROLLER_IP, bridge, bridge))
        log = open(os.path.join(self.folder, "controller.log"), "w")
        self.controller_process = self.start(guide.CONTROLLER, log=log)
        answered = "-o /dev/null -w '%%{http_code}' https://%s:8080/fabric/topology" % CONTROLLER_IP
        self.wait(lambda: self.curl_json(answered) == 200, "the controller's REST API")

    def switches(self):
        userspace = guide.BRIDGE.replace("set bridge BRIDGE ",
                                         "set bridge BRIDGE datapath_type=netdev ")
        for switch in self.description["switches"]:
            self.commands_run.add(guide.BRIDGE)
            self.run(userspace, BRIDGE=switch["name"], DPID="%016x" % switch["dpid"])
        for link in self.description["links"]:
            ends = [(link["a"], link["a_port"]), (link["b"], link["b_port"])]
            self.setup("ip link add %s-eth%d type veth peer name %s-eth%d" % (*ends[0], *ends[1]))
            for switch, port in ends:
                self.attach(switch, "%s-eth%d" % (switch, port), port)

    def attach(self, switch, port_name, number):
        self.run(guide.PORT, BRIDGE=switch, PORT=port_name, NUMBER=number)
        self.run(guide.OFFLOADS, PORT=port_name)
        self.setup("ip link set %s up" % port_name)

    def hosts(self):
        self.run(guide.RECEIVE_BUFFERS)   # a host-wide setting: the namespaces share it
        for number, host in enumerate(self.description["hosts"], 2):
            name, iface = host["name"], "%s-eth0" % host["name"]
            switch_end = "%s-eth%d" % (host["switch"], host["port"])
            self.plug_in(host, iface, switch_end, number)
            self.attach(host["switch"], switch_end, host["port"])
            self.run(guide.OFFLOADS, host=name, PORT=iface)
            self.run(guide.MULTICAST_ROUTE, host=name, IFACE=iface)

    def plug_in(self, host, iface, switch_end, number):
        """A namespace for the host: its data-plane veth (its address and MAC from the
        description) and a veth to the management network, numbered `number` there."""
        name, namespace = host["name"], NAMESPACE_PREFIX + host["name"]
        inside = "ip netns exec %s " % namespace
        self.setup("ip netns add %s && %sip link set lo up" % (namespace, inside))
        self.setup("ip link add %s type veth peer name %s && ip link set %s netns %s"
                   % (iface, switch_end, iface, namespace))
        self.setup(inside + "ip link set %s address %s" % (iface, host["mac"]))
        self.setup(inside + "ip addr add %s/8 dev %s" % (host["ip"], iface))
        self.setup(inside + "ip link set %s up" % iface)
        self.setup("ip link add mg-%s type veth peer name %s-mgmt && ip link set %s-mgmt netns %s"
                   % (name, name, name, namespace))
        self.setup("ip link set mg-%s master %s up" % (name, NAMESPACE_MANAGEMENT_BRIDGE))
        self.setup(inside + "ip addr add %s.%d/24 dev %s-mgmt"
                   % (NAMESPACE_MANAGEMENT_PREFIX, number, name))
        self.setup(inside + "ip link set %s-mgmt up" % name)

    def describe(self):
        with open(os.path.join(self.paths["/etc/syncfabric"], "fabric.json"), "w") as handle:
            json.dump(self.description, handle)
        answer = json.loads(self.run(guide.DESCRIPTION))
        if "error" in answer:
            raise RuntimeError("PUT /fabric/topology: %s" % answer["error"])
        self.wait(lambda: all(s["synced"] for s in json.loads(self.curl_json(
            "https://%s:8080/fabric/topology" % CONTROLLER_IP))["switches"]),
            "every switch to connect and sync")

    def daemons(self):
        self.run(guide.DAEMON_TOKEN)
        environment, _command = guide.unit_service(guide.UNIT.read_text())
        settings = " ".join("%s=%s" % pair for pair in environment if pair[0] != "file:")
        files = [value for name, value in environment if name == "file:"]
        command = "set -a; %s; export %s; exec %s" % (
            "; ".join(". %s" % path for path in files), settings,
            guide.unit_command_line(guide.UNIT.read_text()))
        self.commands_run.add(guide.DAEMON)   # the unit's command line is the guide's
        for host in self.description["hosts"]:
            if host.get("role") == "aggregator":
                self.start(command, host=host["name"])

    def job(self, rounds_expected=5):
        """The guide's smoke test: a job, its rounds on every worker, its release."""
        job = json.loads(self.run(guide.JOB))
        if "error" in job:
            raise RuntimeError("POST /jobs: %s" % job["error"])
        workers = {w: self.start(guide.SMOKE_TEST, host=w, JOB=job["id"], HOST=w)
                   for w in job["workers"]}
        rounds = {}
        for worker, process in workers.items():
            output = process.communicate(timeout=120)[0]
            lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
            if process.returncode != 0 or len(lines) != rounds_expected + 1:
                raise RuntimeError("%s's smoke test failed (%s): %s"
                                   % (worker, process.returncode, output[-600:]))
            rounds[worker] = [line["exact"] for line in lines[:-1]]
        released = json.loads(self.run(guide.RELEASE, JOB=job["id"], KEY=job["release_key"]))
        if released.get("released", {}).get("id") != job["id"]:
            raise RuntimeError("DELETE /jobs/%d: %s" % (job["id"], released))
        return job, rounds

    # --- helpers ------------------------------------------------------------------

    def curl_json(self, arguments):
        """What curl prints for the controller, with the guide's CA and token."""
        command = guide.filled(guide.CURL, {}, self.paths) + " -s " + arguments
        output = subprocess.run(["bash", "-c", command], capture_output=True, text=True).stdout
        return int(output) if output.isdigit() else output

    def wait(self, condition, what):
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if self.controller_process.poll() is not None:
                raise RuntimeError("ryu-manager ended: see %s/controller.log" % self.folder)
            try:
                if condition():
                    return
            except (ValueError, KeyError):
                pass
            time.sleep(0.5)
        raise RuntimeError("waited %d s for %s" % (WAIT_S, what))

    def remove(self):
        stop_processes(reversed(self.processes))
        remove_namespace_leftovers(namespace_leftovers())
        found = bridge_leftovers()
        if found["bridges"] or found["links"]:
            remove_leftovers(found)
        shutil.rmtree(self.folder, ignore_errors=True)


def check_free():
    """PlatformError unless OVS runs and nothing holds the names and ports the check uses."""
    check_ovs_running()
    taken = bridge_leftovers()["bridges"] + namespace_leftovers()
    if taken:
        raise PlatformError("%s are in use (another fabric, or one left behind: `make "
                            "leftovers`)" % ", ".join(taken))
    listening = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True).stdout
    busy = [port for port in ("6653", "8080") if ":%s " % port in listening]
    if busy:
        raise PlatformError("the guide's port(s) %s are in use: stop what listens there"
                            % ", ".join(busy))


def follow_guide(deployment):
    """Every section of the guide in order; (the job, {worker: [exact per round]},
    what the switches still held of ours after its release)."""
    deployment.controller()
    deployment.switches()
    deployment.hosts()
    deployment.describe()
    deployment.daemons()
    job, rounds = deployment.job()
    time.sleep(1.0)   # the release's removals confirmed
    return job, rounds, switch_leftovers([s["name"] for s in deployment.description["switches"]])


def parse_args(argv):
    parser = ArgumentParser(prog="python -m experiments.deploy_check",
                            description=__doc__.split("\n\n")[0])
    return parser.parse_args(argv)


def main(argv=None):
    parse_args(argv)
    signal.signal(signal.SIGTERM, lambda _signal, _frame: sys.exit("deploy_check: stopped"))
    try:
        check_free()
    except PlatformError as error:
        sys.exit("error: %s" % error)
    deployment = Deployment(deploy_fabric(), tempfile.mkdtemp(prefix="syncfabric-deploy-"))
    try:
        job, rounds, held = follow_guide(deployment)
    except (RuntimeError, subprocess.SubprocessError, OSError) as error:
        sys.exit("error: %s" % error)
    finally:
        deployment.remove()
    left = bridge_leftovers()["bridges"] + namespace_leftovers()
    report(deployment, job, rounds, held, left)
    skipped = [command for command in guide.RUN if command not in deployment.commands_run]
    if skipped:
        print("error: the check skipped the guide's %s" % "; ".join(skipped))
    if held or left or skipped or not all(all(exact) for exact in rounds.values()):
        sys.exit("error: the guide's deployment did not pass (see above)")


def report(deployment, job, rounds, held, left):
    run = [command for command in guide.RUN if command in deployment.commands_run]
    print("\ndeploy_check: ran %d of the guide's %d commands; did not run %d:"
          % (len(run), len(guide.RUN) + len(guide.NOT_RUN), len(guide.NOT_RUN)))
    for command, reason in guide.NOT_RUN.items():
        print("  - %s\n      (%s)" % (command, reason))
    print("job %d on %s: rounds exact: %s" % (job["id"], ", ".join(job["workers"]), rounds))
    print("switches held of ours after the release: %s" % (held or "nothing"))
    print("left on the machine after removal: %s" % (left or "nothing"))


if __name__ == "__main__":
    main()
