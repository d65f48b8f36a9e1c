"""A flood from a host outside a job: UDP datagrams with another host's source address,
sent through a raw socket (IP_HDRINCL) to a job's ports, paced to a packet rate.

    python -m experiments.traffic.spoof --source 10.0.0.1 --job 3 --fragments 140 \\
        --pps 1000 [--count 20000] 10.0.0.5:20016 10.0.0.6:20016

Each datagram is 1472 bytes (a full one at MTU 1500) and starts with a fragment
header of the job's (gradient_wire.HEADER) naming the spoofed worker's bit, so that one
which reached a daemon would be taken for that worker's. It sends --count datagrams,
or until SIGTERM without one, and prints how many it sent. Root only (a raw socket).
"""

import signal
import socket
import struct
import sys
import time

from syncfabric.hosts.cli import ArgumentParser
from syncfabric.hosts.packets.gradient_wire import HEADER

DATAGRAM_BYTES = 1472
IPV4_HEADER = struct.Struct("!BBHHHBBH4s4s")
UDP_HEADER = struct.Struct("!HHHH")
SOURCE_PORT = 40000
ROUNDS_NAMED = 20   # the fragments claim rounds 1..ROUNDS_NAMED in turn


def packet(source, target, job, fragments, worker_bit, n):
    """The n-th IPv4 packet: header (the kernel fills in its checksum), UDP header
    (no checksum) and a fragment of the spoofed worker's."""
    address, port = target
    payload = HEADER.pack(job, 1 + n % ROUNDS_NAMED, n % fragments, fragments, worker_bit)
    payload += b"\x47" * (DATAGRAM_BYTES - len(payload))
    udp = UDP_HEADER.pack(SOURCE_PORT, port, UDP_HEADER.size + len(payload), 0) + payload
    return IPV4_HEADER.pack(0x45, 0, IPV4_HEADER.size + len(udp), n & 0xFFFF, 0, 64,
                            socket.IPPROTO_UDP, 0, socket.inet_aton(source),
                            socket.inet_aton(address)) + udp


def flood(args, stop):
    """Send until --count or stop(); how many were sent."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    started, sent = time.monotonic(), 0
    while (args.count is None or sent < args.count) and not stop():
        target = args.targets[sent % len(args.targets)]
        sock.sendto(packet(args.source, target, args.job, args.fragments, args.worker_bit, sent),
                    (target[0], 0))
        sent += 1
        time.sleep(max(0.0, started + sent / args.pps - time.monotonic()))
    return sent


def target(text):
    address, _colon, port = text.rpartition(":")
    socket.inet_aton(address)
    return address, int(port)


def parse_args(argv):
    parser = ArgumentParser(prog="python -m experiments.traffic.spoof",
                            description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", required=True, help="the source address to claim")
    parser.add_argument("--job", type=int, required=True, help="the job id its headers name")
    parser.add_argument("--fragments", type=int, required=True, help="the job's fragment count")
    parser.add_argument("--worker-bit", type=int, default=1,
                        help="the worker mask its headers carry (default %(default)s)")
    parser.add_argument("--pps", type=float, required=True, help="datagrams per second")
    parser.add_argument("--count", type=int, help="datagrams to send (default: until SIGTERM)")
    parser.add_argument("targets", nargs="+", type=target, metavar="ADDRESS:PORT")
    args = parser.parse_args(argv)
    if args.pps <= 0 or args.fragments < 1 or (args.count is not None and args.count < 1):
        parser.error("--pps, --fragments and --count must be positive")
    return args


def main(argv=None):
    args = parse_args(argv)
    stopping = []
    signal.signal(signal.SIGTERM, lambda _signal, _frame: stopping.append(True))
    print(flood(args, lambda: bool(stopping)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
