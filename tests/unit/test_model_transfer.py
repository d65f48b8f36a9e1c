import hashlib

from syncfabric.hosts import pacing
from syncfabric.hosts.wire import chunk_bytes, chunk_count, model_bytes, ranges, wire_bytes


def test_model_is_seeded_float32_bytes():
    model = model_bytes(0.1, seed=3)
    assert len(model) == 100_000 and model == model_bytes(0.1, seed=3)
    assert hashlib.sha256(model).digest() != hashlib.sha256(model_bytes(0.1, seed=4)).digest()


def test_chunks_cover_the_model():
    assert chunk_count(chunk_bytes()) == 1 and chunk_count(chunk_bytes() + 1) == 2


def test_missing_indices_become_ranges():
    assert ranges([]) == []
    assert ranges([0, 1, 2, 5, 7, 8]) == [[0, 3], [5, 6], [7, 9]]


def test_wire_size_counts_every_header_of_every_chunk():
    # one full chunk fills a 1500-byte IP packet: 1514 bytes with the Ethernet header
    assert wire_bytes(chunk_bytes()) == 1514
    assert wire_bytes(chunk_bytes() + 1) == chunk_bytes() + 1 + 2 * (1514 - chunk_bytes())


def test_a_full_send_buffer_delays_a_datagram_and_loses_none(monkeypatch):
    class FullOnce:
        """A non-blocking socket whose buffer is full at its second datagram."""
        def __init__(self):
            self.sent, self.full = [], [False, True]

        def sendto(self, packet, address):
            if self.full and self.full.pop(0):
                raise BlockingIOError(11, "Resource temporarily unavailable")
            self.sent.append(packet)

    waits = []
    monkeypatch.setattr(pacing.select, "select", lambda r, w, x, timeout: waits.append(w))
    sock = FullOnce()
    packets = [bytes([n]) * 100 for n in range(4)]
    pacing.send_streams(sock, [(("10.0.0.2", 9), packets, 1000.0)])
    assert sock.sent == packets and waits == [[sock]]
