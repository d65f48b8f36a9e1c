"""The control channel between a host program and whoever runs it: newline-delimited
JSON over TCP, a hello with the program's name, then messages until "bye"."""

import json
import socket
import time


def connect(address, timeout_s):
    """A Channel to "IP:port", retrying until timeout_s (the other side may not listen yet)."""
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            sock = socket.create_connection((host, int(port)), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    sock.settimeout(None)
    return Channel(sock)


class CoordinatedProgram:
    """A program in a Mininet host run by a coordinator over the management network: it
    says hello with its name, then hands each message to handle() until "bye"."""

    def __init__(self, args, address):
        self.args = args
        self.channel = connect(address, args.connect_timeout_s)
        self.channel.send({"hello": args.name})

    def serve(self):
        while True:
            message = self.channel.receive()
            if "bye" in message:
                return
            self.handle(message)

    def handle(self, message):
        raise NotImplementedError


def accept_named(listener, names):
    """{name: Channel} once every one of `names` connected and said hello."""
    channels = {}
    while len(channels) < len(names):
        sock, _address = listener.accept()
        channel = Channel(sock)
        channels[channel.receive()["hello"]] = channel
    unexpected = set(channels) - set(names)
    if unexpected:
        raise RuntimeError("unexpected peers: %s" % ", ".join(sorted(unexpected)))
    return channels


class Channel:
    """Newline-delimited JSON over a TCP socket. receive() waits for the next message;
    poll() returns those already here without waiting (a sender reads its receivers'
    progress between datagrams)."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = bytearray()

    def send(self, message):
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def _fill(self, wait):
        """Read what the socket has (waiting for something if `wait`); False if nothing."""
        try:
            data = self.sock.recv(65536, 0 if wait else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        if not data:
            raise ConnectionError("peer closed the control channel")
        self.buffer += data
        return True

    def _next_message(self):
        end = self.buffer.find(b"\n")
        if end < 0:
            return None
        line = bytes(self.buffer[:end])
        del self.buffer[:end + 1]
        return json.loads(line)

    def receive(self):
        while (message := self._next_message()) is None:
            self._fill(wait=True)
        return message

    def poll(self):
        """Every complete message that has arrived, without waiting."""
        while self._fill(wait=False):
            pass
        messages = []
        while (message := self._next_message()) is not None:
            messages.append(message)
        return messages

    def receive_exactly(self, size):
        while len(self.buffer) < size:
            self._fill(wait=True)
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data
