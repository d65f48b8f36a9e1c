"""The host library's receiving sockets on loopback: datagrams taken without waiting, and
a receive buffer without CAP_NET_ADMIN."""

import logging
import select
import socket

from syncfabric.hosts.transport import receivers


def waited_for(sock, count):
    """The datagrams on `sock`, waiting up to 2 s at a time until `count` came."""
    taken = []
    while len(taken) < count and select.select([sock], [], [], 2)[0]:
        taken += list(receivers.datagrams(sock))
    return taken


def test_a_receiving_socket_takes_what_waits_and_never_blocks():
    sock = receivers.receiving_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        for payload in (b"one", b"two"):
            sender.sendto(payload, ("127.0.0.1", port))
    assert sorted(waited_for(sock, 2)) == [b"one", b"two"]
    assert list(receivers.datagrams(sock)) == []   # nothing left: returns, does not wait
    sock.close()


def test_without_cap_net_admin_the_buffer_falls_back_with_a_warning(monkeypatch, caplog):
    class Unprivileged(socket.socket):
        def setsockopt(self, level, option, value):
            if option == receivers.SO_RCVBUFFORCE:
                raise PermissionError("Operation not permitted")
            super().setsockopt(level, option, value)

    monkeypatch.setattr(receivers.socket, "socket", Unprivileged)
    receivers.warn_buffer_capped.cache_clear()
    with caplog.at_level(logging.WARNING, logger="syncfabric.hosts"):
        first = receivers.receiving_socket("127.0.0.1", 0)
        second = receivers.receiving_socket("127.0.0.1", 0)
    assert first.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) > 0
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "CAP_NET_ADMIN" in caplog.records[0].message
    first.close()
    second.close()
