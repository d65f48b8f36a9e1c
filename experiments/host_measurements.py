"""Measurements taken from inside Mininet hosts: reachability and TCP throughput."""

import json
import time


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
