"""A worker, aggregator or PS of a synchronous training job: the gradient host program
(gradient_host) that also holds the model, computes its minibatch's gradient
(digits_mlp) and applies each round's update.

    python -m syncfabric.hosts.training_host --name h1 --data-ip 10.0.0.1 \\
        --coordinator 10.0.0.254:7200
"""

import base64
import hashlib
import sys
import time

import numpy as np

from syncfabric.hosts.digits_mlp import (TrainingSetup, dataset, initial_parameters,
                                         one_blas_thread, sgd_update, worker_gradient)
from syncfabric.hosts.gradient_host import Process, parse_args
from syncfabric.hosts.pacing import multicast_sender, send_streams
from syncfabric.hosts.receivers import ChunkReceiver, receive_chunks
from syncfabric.hosts.wire import DATA_PORT, chunk_packets, expand


class TrainingProcess(Process):
    """A PS, worker or aggregator of the training job (aggregators only add)."""

    def __init__(self, args):
        super().__init__(args)
        self.setup, self.role, self.index = None, None, None
        self.parameters = None   # the PS's model, or a worker's copy of this round's
        self.velocity = None
        self.data = None
        self.gradient = (None, None)   # a worker's (round, gradient)

    def handle(self, message):
        phase = message.get("phase")
        if phase == "setup":
            self._setup(message)
        elif phase == "parameters" and self.role == "ps":
            self._send_parameters(message["round"])
        elif phase == "parameters":
            self._receive_parameters(message)
        elif phase == "compute":
            self._compute(message["round"])
        elif phase == "report_state":
            self.channel.send({name: base64.b64encode(values.tobytes()).decode() for name, values
                               in (("parameters", self.parameters), ("velocity", self.velocity))})
        else:
            self._round(message)

    def _setup(self, message):
        self.setup = TrainingSetup(**message["setup"])
        self.role, self.index = message["role"], message.get("index")
        if self.role == "ps":
            self.parameters = initial_parameters(self.setup)
            self.velocity = np.zeros_like(self.parameters)
        if self.role == "worker":
            self.data = dataset(self.setup.seed)
        self.channel.send({"ready": "setup"})

    def _send_parameters(self, number):
        data = self.parameters.tobytes()
        self.channel.send({"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)})
        sender = multicast_sender(self.args.data_ip)
        try:
            while True:
                request = self.channel.receive()
                if request == {"done": number}:
                    return
                send_streams(sender, [((item["ip"], DATA_PORT),
                                       chunk_packets(number, data, expand(item["chunks"])),
                                       item["rate_mbps"]) for item in request["send"]])
                self.channel.send({"sent": number})
        finally:
            sender.close()

    def _receive_parameters(self, message):
        receiver = ChunkReceiver(message["group"], DATA_PORT, self.args.data_ip, message["round"],
                                 message["size"])
        self.channel.send({"ready": message["round"]})
        try:
            receive_chunks(self.channel, receiver, message["sha256"])
            self.parameters = np.frombuffer(bytes(receiver.data), dtype=np.float32)
        finally:
            receiver.close()

    def _compute(self, number):
        started = time.perf_counter()
        loss, gradient = worker_gradient(self.setup, self.parameters, self.data, self.index, number)
        self.gradient = (number, gradient)
        self.channel.send({"computed": number, "loss": loss,
                           "compute_s": time.perf_counter() - started})

    def worker_values(self, plan):
        number, gradient = self.gradient
        if number != plan["round"]:
            raise RuntimeError("asked for round %d's gradient, computed round %s's"
                               % (plan["round"], number))
        return gradient

    def on_sum(self, plan, total):
        started = time.perf_counter()
        self.parameters, self.velocity = sgd_update(self.setup, self.parameters, self.velocity,
                                                    total)
        return {"update_s": time.perf_counter() - started}


def main(argv=None):
    args = parse_args(argv, "python -m syncfabric.hosts.training_host", __doc__)
    # also fast: idle BLAS threads spinning in eight workers on two cores made a
    # 1.3 ms gradient take 0.3 s
    with one_blas_thread():
        TrainingProcess(args).serve()


if __name__ == "__main__":
    sys.exit(main())
