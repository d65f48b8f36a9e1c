"""Measurements taken from inside Mininet hosts: reachability, TCP throughput, and what
receivers of a multicast address get from a sender that sends as fast as it likes."""

import json
import subprocess
import time
from dataclasses import dataclass


def ping_all_loss_pct(net, timeout_s=1):
    """Percentage of all ordered host pairs whose single ping got no answer."""
    return float(net.pingAll(timeout=str(timeout_s)))


def tcp_throughput_mbps(src, dst, seconds=5, port=5201):
    """Receiver-side goodput of one iperf3 TCP stream from host src to host dst, in Mbit/s."""
    server = dst.popen(["iperf3", "--server", "--one-off", "--port", str(port)])
    try:
        for _attempt in range(50):
            output = src.cmd("iperf3 --json --client %s --port %d --time %d"
                             % (dst.IP(), port, seconds))
            result = json.loads(output)
            if "error" not in result:
                return result["end"]["sum_received"]["bits_per_second"] / 1e6
            if "refused" not in result["error"]:
                raise RuntimeError("iperf3 %s -> %s failed: %s" % (src, dst, result["error"]))
            time.sleep(0.1)  # server not listening yet
        raise RuntimeError("iperf3 server on %s never started listening" % dst)
    finally:
        server.terminate()
        server.wait()


def multicast_goodput_mbps(sender, receivers, address, send_mbps, seconds=5, port=5001):
    """{receiver name: Mbit/s} that iperf 2 servers joined to the multicast `address` got
    of a UDP stream `sender` sent there at send_mbps for `seconds`: a third-party sender,
    not one of our programs, that can send above a tree's reservation. The bytes each
    received over the send's duration: iperf's own rate runs until the stream's last
    packets arrive, and over multicast they can be lost."""
    return concurrent_goodputs_mbps([UdpStream(sender, receivers, address, port, send_mbps)],
                                    seconds)[0]


@dataclass(frozen=True)
class UdpStream:
    """An iperf 2 UDP stream from `sender` to `address` (a multicast group its
    `receivers` join, or one receiver's own address) at send_mbps, its datagrams marked
    with the IPv4 TOS byte `tos` (syncfabric/traffic_classes.py's tos_byte)."""
    sender: object
    receivers: tuple
    address: str
    port: int
    send_mbps: float
    tos: int = 0


def concurrent_goodputs_mbps(streams, seconds=5):
    """[{receiver name: Mbit/s}] that each UdpStream's receivers got, the streams sent at
    once for `seconds` (multicast_goodput_mbps's rule for the rate)."""
    for stream in streams:
        for host in (stream.sender, *stream.receivers):
            host.cmd("ip route replace 224.0.0.0/4 dev %s" % host.defaultIntf())
    servers = [{host.name: host.popen(["stdbuf", "-oL", "iperf", "--server", "--udp", "--bind",
                                       stream.address, "--port", str(stream.port),
                                       "--reportstyle", "C"], stdout=subprocess.PIPE, text=True)
                for host in stream.receivers} for stream in streams]
    time.sleep(1.0)   # joined and listening
    clients = [stream.sender.popen(
        ["iperf", "--client", stream.address, "--udp", "--port", str(stream.port),
         "--bandwidth", "%dK" % int(stream.send_mbps * 1000), "--time", str(seconds),
         "--ttl", "8", "--len", "1400", "--tos", str(stream.tos)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for stream in streams]
    for client in clients:
        client.wait(timeout=seconds + 30)
    time.sleep(1.0)
    goodputs = []
    for receiving in servers:
        goodput = {}
        for name, server in receiving.items():
            server.terminate()
            output, _ = server.communicate(timeout=10)
            reports = [line.split(",") for line in output.splitlines() if line.count(",") >= 8]
            goodput[name] = int(reports[-1][7]) * 8 / seconds / 1e6 if reports else 0.0
        goodputs.append(goodput)
    return goodputs
