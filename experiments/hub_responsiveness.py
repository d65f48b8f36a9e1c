"""Does the controller keep answering while it plans? A real ryu-manager with the four apps
that plan (HUB_APPS) gets a 64x64 spine-leaf description (2 hosts per leaf, 20% of the
switches with an aggregator) and a request for a GRID plan of 100 workers, the largest
job of the GRID paper. While the plan is computed:

- a minimal OpenFlow 1.3 switch (a raw socket, a dpid the fabric does not have, so the
  plan is made on the whole fabric) sends an echo request every 10 ms and times the reply;
- a client GETs /multicast/trees every 10 ms and times the answer;
- then leaf2 connects as such a switch (answering barriers), and the plan is asked
  for again while a client creates and releases a one-switch tree on leaf2 every 50 ms:
  each creation is computed, sent, confirmed by leaf2's barrier reply and answered.
  (With one switch connected the others count as down, so this plan is smaller.)

    python -m experiments.hub_responsiveness --out results/hub_responsiveness.csv

No Mininet and no root: the other switches never connect, so the plan is refused with
503 after it is computed, which is all this measures. Prints the worst latencies during
planning (target: under 50 ms) and writes CSV (one row per probe) + PNG.
"""

import random
import socket
import struct
import sys
import threading
import time
import urllib.request
from pathlib import Path

from experiments.cli import experiment_parser, progress_printer, write_csv
from experiments.controller_process import ControllerProcess, wait_until
from experiments.sim.fabrics import paper_scale_fabric
from experiments.testbed import check_port_free
from syncfabric.hosts.transport.controller_client import ControllerHttpError

COLUMNS = ["probe", "phase", "samples", "median_ms", "max_ms"]
# the apps that plan and install (the jobs' app plans nothing this benchmark asks for)
HUB_APPS = ("apps.fabric_controller", "apps.multicast_controller", "apps.selmcast_controller",
            "apps.ina_controller")
OFP_VERSION = 4
HELLO, ECHO_REQUEST, ECHO_REPLY, FEATURES_REQUEST, FEATURES_REPLY = 0, 2, 3, 5, 6
MULTIPART_REQUEST, MULTIPART_REPLY, BARRIER_REQUEST, BARRIER_REPLY = 18, 19, 20, 21
PROBE_INTERVAL_S = 0.01
TREE_INTERVAL_S = 0.05
IDLE_S = 1.0                 # probes before the plan is asked for: the baseline
ECHO_PROBE_DPID = 0xfeed
PROBE_PATH = "/multicast/trees"   # small: the answer times the hub, not JSON encoding
TARGET_MS = 50.0
say = progress_printer("hub_responsiveness")


class ProbeSwitch:
    """Just enough of an OpenFlow 1.3 switch to be taken as connected: hello, features,
    empty multipart replies, barrier replies; it times echo round trips."""

    def __init__(self, port, dpid):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.dpid = dpid
        self.echoes = []            # (sent at, round trip s)
        self._sent = {}             # echo xid -> sent at
        self._xid = 0x5000
        self._stop = threading.Event()
        threading.Thread(target=self._receive, daemon=True).start()

    def _send(self, kind, xid, body=b""):
        self.sock.sendall(struct.pack("!BBHI", OFP_VERSION, kind, 8 + len(body), xid) + body)

    def _receive(self):
        buffer = b""
        self._send(HELLO, 1)
        while not self._stop.is_set():
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buffer += chunk
            while len(buffer) >= 8:
                _version, kind, length, xid = struct.unpack("!BBHI", buffer[:8])
                if len(buffer) < length:
                    break
                message, buffer = buffer[:length], buffer[length:]
                self._answer(kind, xid, message)

    def _answer(self, kind, xid, message):
        if kind == FEATURES_REQUEST:
            self._send(FEATURES_REPLY, xid, struct.pack("!QIBB2xII", self.dpid, 0, 254, 0, 0, 0))
        elif kind == MULTIPART_REQUEST:   # port descriptions, port statistics: none
            multipart_type = struct.unpack("!H", message[8:10])[0]
            self._send(MULTIPART_REPLY, xid, struct.pack("!HH4x", multipart_type, 0))
        elif kind == BARRIER_REQUEST:
            self._send(BARRIER_REPLY, xid)
        elif kind == ECHO_REQUEST:
            self._send(ECHO_REPLY, xid, message[8:])
        elif kind == ECHO_REPLY and xid in self._sent:
            sent_at = self._sent.pop(xid)
            self.echoes.append((sent_at, time.monotonic() - sent_at))

    def echo(self):
        self._xid += 1
        self._sent[self._xid] = time.monotonic()
        self._send(ECHO_REQUEST, self._xid)

    def close(self):
        self._stop.set()
        self.sock.close()


def parse_args(argv):
    parser = experiment_parser("experiments.hub_responsiveness", __doc__)
    parser.add_argument("--workers", type=int, default=100, help="workers of the GRID job")
    parser.add_argument("--size", type=int, default=64, help="spines = leaves of the fabric")
    parser.add_argument("--of-port", type=int, default=6653, help="controller's OpenFlow port")
    parser.add_argument("--rest-port", type=int, default=8080, help="controller's REST port")
    parser.add_argument("--out", type=Path, default=Path("results/hub_responsiveness.csv"))
    return parser.parse_args(argv)


class Probes:
    """Latency samples, (at, seconds), per probe, and the planning windows."""

    def __init__(self):
        self.samples = {"echo": [], "rest_get": [], "tree_install": []}
        self.windows = []

    def timed(self, probe, call):
        started = time.monotonic()
        result = call()
        self.samples[probe].append((started, time.monotonic() - started))
        return result


def plan_while_probing(client, request, switch, probes, tree=None):
    """Ask for the plan after IDLE_S of probing, and probe until it is answered: echoes
    from `switch`, small GETs, and (if `tree`) a tree created and released in a loop."""
    done = threading.Event()
    answer = {}

    def plan():
        started = time.monotonic()
        try:
            client.request("POST", "/ina/plans", request)
            answer["status"] = 201
        except ControllerHttpError as error:
            answer["status"] = error.status
        probes.windows.append((started, time.monotonic()))
        done.set()

    def rest():
        while not done.is_set():
            probes.timed("rest_get", lambda: urllib.request.urlopen(
                client.base_url + PROBE_PATH, timeout=30).read())
            time.sleep(PROBE_INTERVAL_S)

    def trees():
        while not done.is_set():
            created = probes.timed("tree_install", lambda: client.request(
                "POST", "/multicast/trees", tree))
            client.request("DELETE", "/multicast/trees/%d" % created["id"])
            time.sleep(TREE_INTERVAL_S)

    workers = [threading.Thread(target=rest)] + ([threading.Thread(target=trees)] if tree else [])
    for worker in workers:
        worker.start()
    threading.Timer(IDLE_S, lambda: threading.Thread(target=plan).start()).start()
    while not done.is_set():
        switch.echo()
        time.sleep(PROBE_INTERVAL_S)
    for worker in workers:
        worker.join()
    probes.samples["echo"] += switch.echoes
    return answer["status"]


def measure(args):
    check_port_free(args.of_port, "OpenFlow")
    check_port_free(args.rest_port, "REST")
    controller = ControllerProcess(HUB_APPS, args.of_port, args.rest_port, client_timeout_s=120)
    say("starting ryu-manager, log in %s" % controller.log_path)
    controller.start()
    client = controller.client.retrying(30)
    probes, statuses, switches = Probes(), [], []
    try:
        description = paper_scale_fabric(random.Random(0), args.size)
        client.put("/fabric/topology", description)
        hosts = [h["name"] for h in description["hosts"] if h.get("role") != "aggregator"]
        request = {"job": "big", "workers": hosts[:args.workers], "ps": hosts[args.workers],
                   "gradient_mb": 100}
        switches.append(ProbeSwitch(args.of_port, ECHO_PROBE_DPID))
        wait_until(lambda: client.get("/fabric/topology")["unknown_dpids"], 10,
                   "the probe switch to connect")
        say("planning GRID for %d workers on %dx%d (no fabric switch connected) while probing"
            % (args.workers, args.size, args.size))
        statuses.append(plan_while_probing(client, request, switches[0], probes))
        dpid = {s["name"]: s["dpid"] for s in description["switches"]}
        switches.append(ProbeSwitch(args.of_port, dpid["leaf2"]))
        wait_until(lambda: any(s["synced"] for s in client.get("/fabric/topology")["switches"]),
                   30, "leaf2 to sync")
        on_leaf2 = [h["name"] for h in description["hosts"]
                    if h["switch"] == "leaf2" and h.get("role") != "aggregator"]
        say("planning again while trees are installed on leaf2")
        statuses.append(plan_while_probing(
            client, request, switches[1], probes,
            tree={"source": on_leaf2[0], "receivers": on_leaf2[1:2], "bandwidth_mbps": 1}))
    finally:
        for switch in switches:
            switch.close()
        controller.stop()
    return probes, statuses, controller.log_path


def rows_of(probes):
    """A row per probe and phase: "idle", or "planning 1" (the whole fabric) and
    "planning 2" (with trees installed on leaf2)."""
    import statistics

    def phase_of(at):
        return next(("planning %d" % (index + 1) for index, (start, end)
                     in enumerate(probes.windows) if start <= at <= end), "idle")
    rows = []
    for probe, samples in probes.samples.items():
        for phase in ["idle"] + ["planning %d" % (i + 1) for i in range(len(probes.windows))]:
            inside = [latency * 1000 for at, latency in samples if phase_of(at) == phase]
            if inside:
                rows.append({"probe": probe, "phase": phase, "samples": len(inside),
                             "median_ms": round(statistics.median(inside), 2),
                             "max_ms": round(max(inside), 2)})
    return rows


def plot(csv_path, probes):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(figsize=(7, 3.5))
    start = min(at for samples in probes.samples.values() for at, _ in samples)
    labels = {"echo": "echo reply", "rest_get": "GET " + PROBE_PATH,
              "tree_install": "tree created (barrier confirmed)"}
    for probe, samples in probes.samples.items():
        axes.plot([at - start for at, _ in samples], [latency * 1000 for _, latency in samples],
                  ".", markersize=3, label=labels[probe])
    for index, (begin, end) in enumerate(probes.windows):
        axes.axvspan(begin - start, end - start, color="tab:grey", alpha=0.2,
                     label="plan being computed" if index == 0 else None)
    axes.axhline(TARGET_MS, color="tab:red", linestyle="--", label="%d ms" % TARGET_MS)
    axes.set_xlabel("time (s)")
    axes.set_ylabel("latency (ms)")
    axes.set_title("The controller's answers while it plans")
    axes.legend(fontsize=7)
    figure.tight_layout()
    path = Path(csv_path).with_suffix(".png")
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def main(argv=None):
    args = parse_args(argv)
    probes, statuses, log = measure(args)
    rows = rows_of(probes)
    write_csv(rows, args.out, COLUMNS)
    print(plot(args.out, probes), file=sys.stderr)
    print("plans computed in %s s (answers %s: the fabric's other switches are not connected); "
          "controller log %s" % (", ".join("%.2f" % (end - begin) for begin, end in probes.windows),
                                  ", ".join(map(str, statuses)), log))
    for row in rows:
        print("%-12s %-10s %4d samples  median %6s ms  max %6s ms" % (
            row["probe"], row["phase"], row["samples"], row["median_ms"], row["max_ms"]))
    worst = max((row["max_ms"] for row in rows if row["phase"] != "idle"), default=0.0)
    print("worst answer while planning: %.1f ms (target < %d ms)" % (worst, TARGET_MS))


if __name__ == "__main__":
    main()
