"""A job on hosts that are plain network namespaces, wired to Open vSwitch bridges by
hand, with no Mininet: what an engineer with real hosts does, on one machine.

    python -m experiments.namespace_fabric --rounds 5

It builds a small spine-leaf from a fabric description (the one PUT /fabric/topology
takes: --description FILE, or a built-in one), each switch an OVS bridge (userspace
datapath, OpenFlow 1.3, its ports numbered as the description says), each host a
namespace with a veth to its leaf and one to a management bridge, where ryu-manager's
REST API answers. It starts ryu-manager, asks for a job (POST /jobs), starts the
aggregator daemon where the job sums outside its workers (experiments/traffic/jobs.py, as
the emulated experiments do) and runs --rounds rounds from every worker, each sum checked
exactly; then removes everything, also on SIGTERM or Ctrl-C. Needs root
and a running Open vSwitch (`make ovs`).
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error

from experiments.controller_process import ControllerProcess
from experiments.defaults import (JOB_START_S, NAMESPACE_MANAGEMENT_BRIDGE,
                                 NAMESPACE_MANAGEMENT_PREFIX, NAMESPACE_PREFIX)
from experiments.traffic.jobs import run_job, served_job
from mininet_topos.ovs_state import PlatformError
from syncfabric.hosts.cli import ArgumentParser
from syncfabric.hosts.transport.controller_client import TOKEN_ENV

MANAGEMENT_IP = NAMESPACE_MANAGEMENT_PREFIX + ".1"
OFFLOADS = "tx off rx off tso off gso off gro off"


def small_spine_leaf(spines=1, leaves=2, hosts_per_leaf=2, bw=20):
    """A fabric description: every leaf to every spine, hosts h1.. under the leaves."""
    spine_names = ["spine%d" % s for s in range(1, spines + 1)]
    leaf_names = ["leaf%d" % number for number in range(1, leaves + 1)]
    description = {"switches": [{"name": n, "dpid": 0x1000 + i, "role": "spine"}
                                for i, n in enumerate(spine_names, 1)]
                   + [{"name": n, "dpid": 0x2000 + i, "role": "leaf"}
                      for i, n in enumerate(leaf_names, 1)], "links": [], "hosts": []}
    for position, leaf in enumerate(leaf_names):
        for port, spine in enumerate(spine_names, 1):
            description["links"].append({"a": leaf, "a_port": port, "b": spine,
                                         "b_port": position + 1, "capacity_mbps": bw})
        for h in range(hosts_per_leaf):
            number = position * hosts_per_leaf + h + 1
            description["hosts"].append({"name": "h%d" % number, "ip": "10.0.0.%d" % number,
                                         "mac": "00:00:00:00:00:%02x" % number, "switch": leaf,
                                         "port": spines + h + 1, "capacity_mbps": bw})
    return description


def run(command):
    subprocess.run(command, shell=True, check=True, capture_output=True, text=True)


class NamespaceFabric:
    """The bridges, namespaces and controller of one description; remove() undoes all."""

    def __init__(self, description, of_port, rest_port, log_path):
        self.description, self.of_port, self.rest_port = description, of_port, rest_port
        self.processes = []
        # the API listens beyond loopback (the hosts reach it on the management network):
        # with the controller's fresh token, in the environment of the programs started
        # in the hosts too
        self.controller = ControllerProcess(["apps.job_controller"], of_port, rest_port,
                                            log_path, client_timeout_s=60)
        self.token, self.client = self.controller.token, self.controller.client
        self.management_url = "http://%s:%d" % (MANAGEMENT_IP, rest_port)

    def namespace(self, host):
        return NAMESPACE_PREFIX + host

    def build(self):
        self._check_free()
        bridge = NAMESPACE_MANAGEMENT_BRIDGE
        run("ip link add %s type bridge && ip addr add %s/24 dev %s && ip link set %s up"
            % (bridge, MANAGEMENT_IP, bridge, bridge))
        for switch in self.description["switches"]:
            run("ovs-vsctl add-br %s -- set bridge %s datapath_type=netdev protocols=OpenFlow13 "
                "fail_mode=secure other-config:datapath-id=%016x -- set-controller %s tcp:127.0.0.1:%d"
                % (switch["name"], switch["name"], switch["dpid"], switch["name"], self.of_port))
        for link in self.description["links"]:
            self._veth(link["a"], link["a_port"], link["b"], link["b_port"])
        for number, host in enumerate(self.description["hosts"], 2):
            self._host(host, number)

    def _check_free(self):
        bridges = subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True,
                                 check=True).stdout.split()
        taken = [s["name"] for s in self.description["switches"] if s["name"] in bridges]
        if taken or os.path.exists("/sys/class/net/" + NAMESPACE_MANAGEMENT_BRIDGE):
            sys.exit("error: bridges %s are in use (another fabric, or one left behind: "
                     "`make leftovers`)" % ", ".join(taken or [NAMESPACE_MANAGEMENT_BRIDGE]))

    def _veth(self, a, a_port, b, b_port):
        ends = ("%s-eth%d" % (a, a_port), "%s-eth%d" % (b, b_port))
        run("ip link add %s type veth peer name %s" % ends)
        for switch, port, end in ((a, a_port, ends[0]), (b, b_port, ends[1])):
            run("ethtool -K %s %s; ip link set %s up" % (end, OFFLOADS, end))
            run("ovs-vsctl add-port %s %s -- set interface %s ofport_request=%d"
                % (switch, end, end, port))

    def _host(self, host, number):
        name, namespace = host["name"], self.namespace(host["name"])
        switch_end, host_end = "%s-eth%d" % (host["switch"], host["port"]), "%s-eth0" % name
        run("ip netns add %s" % namespace)
        run("ip link add %s type veth peer name %s" % (host_end, switch_end))
        run("ip link set %s netns %s" % (host_end, namespace))
        run("ethtool -K %s %s; ip link set %s up" % (switch_end, OFFLOADS, switch_end))
        run("ovs-vsctl add-port %s %s -- set interface %s ofport_request=%d"
            % (host["switch"], switch_end, switch_end, host["port"]))
        inside = "ip netns exec %s " % namespace
        run(inside + "ip link set lo up")
        run(inside + "ip link set %s address %s" % (host_end, host["mac"]))
        run(inside + "ip addr add %s/8 dev %s" % (host["ip"], host_end))
        run(inside + "ethtool -K %s %s; " % (host_end, OFFLOADS) + inside + "ip link set %s up" % host_end)
        run(inside + "ip route add 224.0.0.0/4 dev %s" % host_end)
        run("ip link add mg-%s type veth peer name %s-mgmt" % (name, name))
        run("ip link set %s-mgmt netns %s" % (name, namespace))
        run("ip link set mg-%s master %s up" % (name, NAMESPACE_MANAGEMENT_BRIDGE))
        run(inside + "ip addr add %s.%d/24 dev %s-mgmt"
            % (NAMESPACE_MANAGEMENT_PREFIX, number, name))
        run(inside + "ip link set %s-mgmt up" % name)

    def start_controller(self):
        """ryu-manager with the jobs' app, given this fabric; returns once every switch
        has synced (PlatformError if ryu-manager does not answer)."""
        self.controller.start()
        self.client.put("/fabric/topology", self.description)
        self._wait(lambda: all(s["synced"] for s in self.client.get("/fabric/topology")["switches"]),
                   "every switch to connect and sync")

    def _wait(self, condition, what, timeout_s=60):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.controller.running():
                sys.exit("error: ryu-manager ended; see its log, %s" % self.controller.log_path)
            try:
                if condition():
                    return
            except (urllib.error.URLError, ConnectionError):
                pass
            time.sleep(0.25)
        sys.exit("error: waited %d s for %s" % (timeout_s, what))

    def popen(self, host, command, **arguments):
        """`command` in `host`'s namespace, with the controller's token in its environment."""
        arguments["env"] = dict(arguments.get("env") or os.environ, **{TOKEN_ENV: self.token})
        process = subprocess.Popen(["ip", "netns", "exec", self.namespace(host), *command],
                                   **arguments)
        self.processes.append(process)
        return process

    def remove(self):
        stop_processes(self.processes)
        self.controller.stop()
        for host in self.description["hosts"]:
            subprocess.run(["ip", "netns", "delete", self.namespace(host["name"])], capture_output=True)
        for switch in self.description["switches"]:
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", switch["name"]], capture_output=True)
        for link in self.description["links"]:
            subprocess.run(["ip", "link", "delete", "%s-eth%d" % (link["a"], link["a_port"])],
                           capture_output=True)
        subprocess.run(["ip", "link", "delete", NAMESPACE_MANAGEMENT_BRIDGE], capture_output=True)


def stop_processes(processes, timeout_s=10):
    """SIGTERM each process still running, and SIGKILL one that outlives timeout_s."""
    for process in processes:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()


def namespace_leftovers():
    """What a run of this script killed outright left: its namespaces and bridge."""
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return ([line.split()[0] for line in namespaces.splitlines()
             if line.startswith(NAMESPACE_PREFIX)]
            + [NAMESPACE_MANAGEMENT_BRIDGE]
            * os.path.exists("/sys/class/net/" + NAMESPACE_MANAGEMENT_BRIDGE))


def remove_namespace_leftovers(names):
    for name in names:
        command = (["ip", "link", "delete"] if name == NAMESPACE_MANAGEMENT_BRIDGE
                   else ["ip", "netns", "delete"])
        subprocess.run(command + [name], capture_output=True)


def parse_args(argv):
    parser = ArgumentParser(prog="python -m experiments.namespace_fabric",
                            description=__doc__.split("\n\n")[0],
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--description", type=argparse.FileType(),
                        help="a fabric description (JSON, as PUT /fabric/topology takes); "
                             "default: 1 spine, 2 leaves, 2 hosts each at 20 Mbit/s")
    parser.add_argument("--workers", default="h1,h2,h3", help="comma-separated (default %(default)s)")
    parser.add_argument("--model-bytes", type=int, default=400_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--of-port", type=int, default=16699)
    parser.add_argument("--rest-port", type=int, default=18199)
    parser.add_argument("--log", default="/tmp/syncfabric-namespace-ryu.log",
                        help="ryu-manager's log (default %(default)s)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if os.geteuid() != 0:
        sys.exit("error: namespaces and OVS bridges need root")
    description = json.load(args.description) if args.description else small_spine_leaf()
    fabric = NamespaceFabric(description, args.of_port, args.rest_port, args.log)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped by SIGTERM; fabric removed"))
    try:
        fabric.build()
        fabric.start_controller()
        with served_job(fabric, {"workers": args.workers.split(","), "placement": "dedicated",
                                 "model_bytes": args.model_bytes}) as job:
            lines = run_job(fabric, job, args.rounds, start_in_s=JOB_START_S)
    except PlatformError as error:   # ryu-manager did not start
        sys.exit("error: %s" % error)
    finally:
        fabric.remove()
    print("job %d: shards on %s, predicted %.3f s a round" % (
        job["id"], ",".join(s["host"] for s in job["shards"]), job["predicted_round_s"]))
    for worker, rounds in lines.items():
        print("%s: %s" % (worker, rounds[-1]))
    exact = all(r["exact"] for rounds in lines.values() for r in rounds)
    print(json.dumps({"rounds": args.rounds, "workers": len(lines), "exact": exact}))
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
