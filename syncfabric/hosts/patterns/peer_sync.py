"""A peer of a SELMCAST job: it multicasts its update to the receivers the controller chose
for it, over its round's reserved tree, and receives the updates sent to it.

    python -m syncfabric.hosts.patterns.peer_sync peer --name h3 --data-ip 10.0.0.3 \\
        --coordinator 10.0.0.254:7100 --update-mb 1
"""

import hashlib
import sys

from syncfabric.hosts.cli import ArgumentParser, host_program_arguments
from syncfabric.hosts.transport.control_channel import CoordinatedProgram
from syncfabric.hosts.transport.pacing import multicast_sender, send_paced
from syncfabric.hosts.transport.receivers import ChunkReceiver, Watch, drain
from syncfabric.hosts.packets.wire import DATA_PORT, chunk_count, model_bytes


class Peer(CoordinatedProgram):
    def __init__(self, args):
        super().__init__(args, args.coordinator)
        self.sender = multicast_sender(args.data_ip)

    def handle(self, plan):
        """One round: send this peer's update on its trees, take the others'."""
        number = plan["round"]
        update = model_bytes(self.args.update_mb, seed=[plan["seed"], number])
        receivers = {sender: ChunkReceiver(group, DATA_PORT, self.args.data_ip, number, plan["size"])
                     for sender, group in plan["receive"].items()}
        watch = Watch(receivers.values(), self.channel)
        self.channel.send({"ready": number, "sha256": hashlib.sha256(update).hexdigest()})
        expected = None
        while True:
            if not watch.take():
                continue
            request = self.channel.receive()
            if "go" in request:
                expected = request["expected"]
                groups = [(group, DATA_PORT) for group in plan["send"]]
                if groups:
                    send_paced(self.sender, groups, number, update,
                               range(chunk_count(len(update))), plan["rate_mbps"], idle=watch.take)
                self.channel.send({"sent": number})
            elif "resend" in request:   # only senders with groups are asked
                for group, missing in request["resend"].items():
                    indices = [i for first, last in missing for i in range(first, last)]
                    send_paced(self.sender, [(group, DATA_PORT)], number, update, indices,
                               request["rate_mbps"] / len(plan["send"]), idle=watch.take)
                self.channel.send({"sent": number})
            elif "report" in request:
                drain(receivers.values())
                self.channel.send({
                    "missing": {s: r.missing() for s, r in receivers.items() if r.missing()},
                    "verified": {s: r.verified(expected[s]) for s, r in receivers.items()}})
            elif "done" in request:
                watch.close()
                for receiver in receivers.values():
                    receiver.close()
                return


def parse_args(argv):
    parser = ArgumentParser(prog="python -m syncfabric.hosts.patterns.peer_sync",
                            description=__doc__.split("\n\n")[0])
    roles = parser.add_subparsers(dest="role", required=True)
    peer = roles.add_parser("peer", help="a worker that sends and receives updates")
    host_program_arguments(peer)
    peer.add_argument("--update-mb", type=float, required=True, help="update size, MB")
    return parser.parse_args(argv)


def main(argv=None):
    Peer(parse_args(argv)).serve()


if __name__ == "__main__":
    sys.exit(main())
