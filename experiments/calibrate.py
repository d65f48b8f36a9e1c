"""Measure the highest per-link rate at which this machine's emulated fabric carries the
experiments' heaviest patterns with first-pass loss under 0.5%, and no traffic waiting
for ovs-vswitchd longer than the fidelity verdict allows.

    python -m experiments.calibrate            # also: make calibrate

On an 8x8 spine-leaf (2 hosts per leaf; the experiments' fabric, other sizes by
flag, any other fabric by --topo, so that --bw auto fits the fabric a run uses) every link is shaped to a trial rate R and the hosts send paced UDP for a
few seconds at 95% of what their links carry:
- multicast: h1 to the other hosts over a reserved path-aware tree;
- all-to-one: the other hosts to h1, together at 0.95 R (a PS's gradients);
- all-to-all: every host to every other, each host at 0.95 R (peer sync).
Bisection finds, per pattern, the highest R that stays clean (trial_clean), and that R
must then stay clean twice more (else it steps down by 10%).
The rates, the machine and the date go to results/platform.json, which `--bw auto`
reads (experiments/platform_capacity.py). Ratios measured in one run hold at any
rate; seconds are labelled with the rate and the machine. Every trial records what
each layer dropped (experiments/packet_drops.py) and the loss no layer counted.

--compare-baseline first calibrates the data plane every run had before
(mininet_topos/data_plane.py's BASELINE: MTU 1500, OVS's default send buffer), then
the one asked for, and writes the first under `baseline`.
"""

import dataclasses
import datetime
import json
import socket
import sys
from pathlib import Path

from tqdm import tqdm

from experiments import fidelity, packet_drops
from experiments.cli import (build_fabric, comma_list, experiment_parser, progress_printer,
                             topo_argument, topo_spec)
from experiments.machine_facts import machine
from experiments.platform_capacity import PATTERNS, PLATFORM_FILE, all_to_all_capacity_mbps
from experiments.testbed import FabricTestbed
from experiments.traffic.launch import run_in_hosts
from mininet_topos.data_plane import BASELINE, DataPlane
from mininet_topos.platform_net import PlatformError, shape_links
from syncfabric.hosts.transport.control_channel import accept_named
from syncfabric.hosts.patterns.load_probe import COORDINATOR_PORT

SEND_FRACTION = 0.95
CONFIRMATIONS = 2
CONFIRMATION_ATTEMPTS = 3


def parse_args(argv):
    parser = experiment_parser("experiments.calibrate", __doc__)
    parser.add_argument("--patterns", type=comma_list(str, PATTERNS), default=list(PATTERNS),
                        help="comma list of %s" % ", ".join(PATTERNS))
    parser.add_argument("--max-mbps", type=float, default=160.0, help="the highest rate tried")
    parser.add_argument("--steps", type=int, default=7, help="bisection steps per pattern")
    parser.add_argument("--seconds", type=float, default=2.0, help="traffic per trial")
    parser.add_argument("--loss", type=float, default=0.005, help="the largest acceptable loss")
    parser.add_argument("--mtu", type=int, default=DataPlane.mtu,
                        help="data-plane MTU (%d by default; %d before)" % (DataPlane.mtu, BASELINE.mtu))
    parser.add_argument("--switch-queue", type=int, default=DataPlane.switch_queue,
                        help="frames each switch port queues, dropping at the head (%d by default; "
                             "0: the kernel's 1000-frame tail-drop queue, as before)"
                        % DataPlane.switch_queue)
    parser.add_argument("--ovs-send-buffer", type=int, default=DataPlane.ovs_send_buffer,
                        help="bytes of send buffer for OVS's transmit socket (%d by default; %d "
                             "before)" % (DataPlane.ovs_send_buffer, BASELINE.ovs_send_buffer))
    parser.add_argument("--ovs-receive-buffer", type=int, default=DataPlane.ovs_receive_buffer,
                        help="bytes of receive buffer for OVS's port sockets (%d by default; %d "
                             "before)" % (DataPlane.ovs_receive_buffer, BASELINE.ovs_receive_buffer))
    parser.add_argument("--compare-baseline", action="store_true",
                        help="calibrate the baseline data plane (MTU %d, the kernel's port "
                             "queues, %d-byte OVS buffers) first, in the same run, and write it "
                             "under `baseline`" % (BASELINE.mtu, BASELINE.ovs_send_buffer))
    parser.add_argument("--topo", type=topo_argument, default=None,
                        help="the fabric to calibrate, as the experiments' --topo (fattree,4); "
                             "default: the spine-leaf of the three flags below")
    parser.add_argument("--spines", type=int, default=8, help="the experiments' fabric: spines")
    parser.add_argument("--leaves", type=int, default=8, help="... leaves")
    parser.add_argument("--hosts-per-leaf", type=int, default=2, help="... and hosts per leaf")
    parser.add_argument("--of-port", type=int, default=6653)
    parser.add_argument("--rest-port", type=int, default=8080)
    parser.add_argument("--out", type=Path, default=PLATFORM_FILE, help="where the rates go")
    args = parser.parse_args(argv)
    if args.max_mbps <= 0 or args.steps < 1 or args.seconds <= 0 or not 0 < args.loss < 1:
        parser.error("--max-mbps, --steps, --seconds and --loss must be positive (loss < 1)")
    if not 576 <= args.mtu <= 9000:
        parser.error("--mtu must be between 576 and 9000")
    if args.switch_queue < 0:
        parser.error("--switch-queue must be 0 or more")
    if min(args.ovs_send_buffer, args.ovs_receive_buffer) < 4096:
        parser.error("--ovs-send-buffer and --ovs-receive-buffer must be at least 4096 bytes")
    return args


def streams(pattern, hosts, ips, rate, group=None):
    """{host: ([[address, Mbit/s], ...], [groups to join])} and {stream: receivers} for
    one trial of `pattern` with links at `rate`."""
    send = SEND_FRACTION * rate
    plan = {name: ([], []) for name in hosts}
    receivers = {}     # (sender, address) -> receiving hosts
    first, others = hosts[0], hosts[1:]
    if pattern == "multicast":
        plan[first][0].append([group, send])
        for name in others:
            plan[name][1].append(group)
        receivers[first, group] = others
    elif pattern == "all-to-one":
        for name in others:
            plan[name][0].append([ips[first], send / len(others)])
            receivers[name, ips[first]] = [first]
    else:
        for name in hosts:
            for other in hosts:
                if other != name:
                    plan[name][0].append([ips[other], send / (len(hosts) - 1)])
                    receivers[name, ips[other]] = [other]
    return plan, receivers


def trial_clean(trial, loss_max):
    """Whether a trial carried its pattern as the experiments' rows must be carried: loss
    at most loss_max, and no OVS receive socket holding more than the fidelity verdict
    allows. Loss alone was not enough: OVS's 4 MiB receive sockets let it fall a
    megabyte behind for a 2-second trial and lose nothing, and at 70% of such a rate
    ps_distribution's 15 workers were flagged for 1-1.8 MB waiting for it."""
    return trial["loss"] <= loss_max and not fidelity.waited_for_ovs(trial["ovs_backlog_kb"])


def trial_loss(plan, receivers, sent, received, hosts):
    """(share of deliveries lost, packets lost at the fewest, worst receiver's share) of
    one trial: sent[host] counts each of its streams' packets, received[host] what came
    from each sender (by index in `hosts`). A packet dropped before a multicast stream
    branches is lost by every receiver, so the drops explain a stream's loss if they are
    as many as the packets its worst receiver missed."""
    expected = got = distinct_lost = 0
    worst = 0.0
    for name in hosts:
        for (address, _rate), packets in zip(plan[name][0], sent[name]):
            lost = [packets - received[receiver].get(str(hosts.index(name)), 0)
                    for receiver in receivers[name, address]]
            expected += packets * len(lost)
            got += packets * len(lost) - sum(lost)
            distinct_lost += max(lost)
            worst = max(worst, max(lost) / max(packets, 1))
    return 1 - got / expected, distinct_lost, worst


class Calibration:
    def __init__(self, bed, args, hosts):
        self.bed, self.args, self.hosts = bed, args, hosts
        self.ips = {name: bed.address(name) for name in hosts}
        self.listener = socket.create_server((bed.management_ip, COORDINATOR_PORT))
        self.listener.settimeout(60)
        self.channels = {}
        self.trials = 0

    def trial(self, pattern, rate):
        """One trial at `rate`: its loss, CPU and drop counters."""
        shape_links(self.bed.net, rate)
        tree = None
        if pattern == "multicast":
            tree = self.bed.client.request("POST", "/multicast/trees", {
                "source": self.hosts[0], "receivers": self.hosts[1:], "policy": "path-aware",
                "bandwidth_mbps": SEND_FRACTION * rate, "ttl_s": 60})
        try:
            return self._send(pattern, rate, tree and tree["address"])
        finally:
            if tree:
                self.bed.client.request("DELETE", "/multicast/trees/%d" % tree["id"])

    def _send(self, pattern, rate, group):
        self.trials += 1
        number = self.trials
        plan, receivers = streams(pattern, self.hosts, self.ips, rate, group)
        for index, name in enumerate(self.hosts):
            send, join = plan[name]
            self.channels[name].send({"step": number, "index": index, "send": send, "join": join,
                                      "seconds": self.args.seconds})
        for name in self.hosts:
            assert self.channels[name].receive() == {"ready": number}
        sampler = self.bed.sampler().start()
        for name in self.hosts:
            self.channels[name].send({"go": number})
        sent = {name: self.channels[name].receive()["packets"] for name in self.hosts}
        usage = sampler.stop()
        for name in self.hosts:
            self.channels[name].send({"report": number})
        received = {name: self.channels[name].receive()["received"] for name in self.hosts}
        loss, distinct_lost, worst = trial_loss(plan, receivers, sent, received, self.hosts)
        unexplained = fidelity.unexplained_loss(loss, distinct_lost, usage)
        return {"pattern": pattern, "rate_mbps": round(rate, 2), "loss": round(loss, 5),
                "unexplained_loss": round(unexplained, 5), "worst_receiver_loss": round(worst, 5),
                "dropped_at": packet_drops.where(usage.drops), "ovs_cpu": round(usage.ovs_cpu, 3),
                "machine_busy": round(usage.machine_busy, 3),
                "ovs_backlog_kb": round(usage.ovs_backlog_kb, 1), "drops": usage.drops}

    def highest_clean_rate(self, pattern, progress):
        """Bisection over (0, max], then the rate found must stay clean CONFIRMATIONS times
        more (one lucky trial is not a capacity); each failure steps it down by 10%."""
        low, high, trials = 0.0, self.args.max_mbps, []

        def clean(rate):
            result = self.trial(pattern, rate)
            trials.append(result)
            progress.set_postfix(pattern=pattern, rate=rate, loss=result["loss"],
                                 backlog_kb=result["ovs_backlog_kb"])
            progress.update()
            return trial_clean(result, self.args.loss)
        rate = high / 2
        for _step in range(self.args.steps):
            if clean(rate):
                low = rate
            else:
                high = rate
            rate = (low + high) / 2
        for _attempt in range(CONFIRMATION_ATTEMPTS):
            if low == 0 or all(clean(low) for _ in range(CONFIRMATIONS)):
                return round(low, 2), True, trials
            low *= 0.9
        return round(low, 2), False, trials

    def run(self):
        command = [sys.executable, "-m", "syncfabric.hosts.patterns.load_probe",
                   "--coordinator", "%s:%d" % (self.bed.management_ip, COORDINATOR_PORT)]

        def drive():
            self.channels = accept_named(self.listener, self.hosts)
            found = {}
            with tqdm(total=len(self.args.patterns) * (self.args.steps + CONFIRMATIONS), desc="trials",
                      unit="trial") as progress:
                for pattern in self.args.patterns:
                    rate, confirmed, trials = self.highest_clean_rate(pattern, progress)
                    found[pattern] = {"max_mbps": rate, "confirmed": confirmed, "trials": trials}
            for channel in self.channels.values():
                channel.send({"bye": True})
            return found
        try:
            return run_in_hosts(self.bed, self.hosts, command, drive, "calibration")
        finally:
            self.listener.close()


def calibrate(args, topo, data_plane):
    """{pattern: found} for the fabric set up as `data_plane`."""
    with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port, data_plane=data_plane,
                       progress=progress_printer("calibrate")) as bed:
        return Calibration(bed, args, topo.hosts(sort=True)).run()


def print_rates(patterns, data_plane, baseline=None):
    for pattern, found in patterns.items():
        against = ""
        if baseline is not None and baseline[pattern]["max_mbps"]:
            against = " (%.2fx the baseline's %.2f)" % (
                found["max_mbps"] / baseline[pattern]["max_mbps"], baseline[pattern]["max_mbps"])
        print("%-11s %6.2f Mbit/s per link%s%s" % (
            pattern, found["max_mbps"], against,
            "" if found["confirmed"] else " (not confirmed: loss or backlog stayed noisy)"))
    print("  with %s" % data_plane.describe())


def main(argv=None):
    args = parse_args(argv)
    topo = build_fabric(args, bw=args.max_mbps)
    data_plane = DataPlane(mtu=args.mtu, switch_queue=args.switch_queue,
                           ovs_send_buffer=args.ovs_send_buffer,
                           ovs_receive_buffer=args.ovs_receive_buffer)
    started = datetime.datetime.now(datetime.timezone.utc)
    baseline = None
    try:
        if args.compare_baseline:
            print("calibrating the baseline data plane first (%s)" % BASELINE.describe())
            baseline = dict(dataclasses.asdict(BASELINE), patterns=calibrate(args, topo, BASELINE))
        patterns = calibrate(args, topo, data_plane)
    except (PlatformError, RuntimeError, ValueError) as error:
        sys.exit("error: %s" % error)
    elapsed = (datetime.datetime.now(datetime.timezone.utc) - started).total_seconds()
    result = {"date": started.isoformat(timespec="seconds"), "machine": machine(),
              "fabric": str(topo_spec(args)),
              "hosts": len(topo.hosts()),
              **dataclasses.asdict(data_plane),
              "chunk_bytes": data_plane.mtu - 28, "loss_threshold": args.loss,
              "backlog_threshold_kb": fidelity.OVS_BACKLOG_MAX_KB,
              "send_fraction": SEND_FRACTION, "seconds_per_trial": args.seconds,
              "calibration_s": round(elapsed, 1), "patterns": patterns}
    if baseline is not None:
        result["baseline"] = baseline
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    if baseline is not None:
        print_rates(baseline["patterns"], BASELINE)
    print_rates(patterns, data_plane, baseline and baseline["patterns"])
    if "all-to-all" in patterns:
        capacity = all_to_all_capacity_mbps(result)
        print("the fabric carries %.0f Mbit/s all-to-all in all (70%% of what it did): the "
              "largest job that runs faithfully at a link rate of R Mbit/s has about %.0f / R "
              "workers" % (capacity, capacity))
    print("calibrated in %.0f s on %s (%d cores); written to %s"
          % (elapsed, result["machine"]["cpu"], result["machine"]["cores"], args.out))


if __name__ == "__main__":
    main()
