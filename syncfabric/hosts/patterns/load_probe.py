"""Paced UDP load for calibration: every host sends its streams for a few seconds and
counts what reaches it, so the coordinator can tell loss per stream.

    python -m syncfabric.hosts.patterns.load_probe --name h1 --data-ip 10.0.0.1 \\
        --coordinator 172.30.0.1:7300

Per step the coordinator tells each host which streams to send ([address, Mbit/s]),
which groups to join and for how long; on "go" all send at once; on "report" each
answers how many datagrams it received from each sender.
"""

import selectors
import struct
import sys
import time

import numpy as np

from syncfabric.hosts.cli import ArgumentParser, host_program_arguments
from syncfabric.hosts.transport.control_channel import CoordinatedProgram
from syncfabric.hosts.transport.pacing import multicast_sender, send_streams
from syncfabric.hosts.transport.receivers import datagrams, receiving_socket
from syncfabric.hosts.packets.wire import FRAME_OVERHEAD, chunk_payload_bytes

COORDINATOR_PORT = 7300
PROBE_PORT = 7301
HEADER = struct.Struct("!II")    # step, sender index
QUIET_S = 0.2


def packets_for(rate_mbps, seconds, size):
    """How many `size`-byte datagrams a stream of rate_mbps (wire bytes) sends in `seconds`."""
    return max(1, int(rate_mbps * 1e6 * seconds / 8 / (size + FRAME_OVERHEAD)))


class Prober(CoordinatedProgram):
    def __init__(self, args):
        super().__init__(args, args.coordinator)
        self.sender = multicast_sender(args.data_ip)

    def handle(self, plan):
        """One step: send the streams it names and count what arrives."""
        number, size = plan["step"], chunk_payload_bytes()
        sock = receiving_socket("", PROBE_PORT, plan["join"], self.args.data_ip)
        received = {}
        kept = bytearray(size)          # what a real receiver does with each datagram:
        seen = np.zeros(1024, dtype=bool)   # keep its payload, mark its chunk

        def take():
            for packet in datagrams(sock):
                step, sender = HEADER.unpack_from(packet)
                if step == number:
                    count = received.get(sender, 0)
                    kept[:len(packet)] = packet
                    seen[count % len(seen)] = True
                    received[sender] = count + 1

        selector = selectors.DefaultSelector()
        selector.register(sock, selectors.EVENT_READ)

        def idle(seconds):
            if selector.select(seconds):
                take()

        self.channel.send({"ready": number})
        assert self.channel.receive() == {"go": number}
        payload = HEADER.pack(number, plan["index"]) + bytes(size - HEADER.size)
        streams = [((address, PROBE_PORT), [payload] * packets_for(rate, plan["seconds"], size), rate)
                   for address, rate in plan["send"]]
        started = time.perf_counter()
        send_streams(self.sender, streams, idle)
        while (left := started + plan["seconds"] - time.perf_counter()) > 0:
            idle(left)     # a host that only receives takes its datagrams as they come
        self.channel.send({"sent": number, "packets": [len(packets) for _a, packets, _r in streams]})
        assert self.channel.receive() == {"report": number}
        while selector.select(QUIET_S):
            take()
        selector.close()
        sock.close()
        self.channel.send({"received": {str(k): v for k, v in received.items()}})


def parse_args(argv):
    parser = ArgumentParser(prog="python -m syncfabric.hosts.patterns.load_probe",
                            description=__doc__.split("\n\n")[0])
    host_program_arguments(parser)
    return parser.parse_args(argv)


def main(argv=None):
    Prober(parse_args(argv)).serve()


if __name__ == "__main__":
    sys.exit(main())
