import hashlib
import time

from syncfabric.hosts.transport import pacing
from syncfabric.hosts.datapath import datapath
from syncfabric.hosts.packets.wire import chunk_bytes, chunk_count, model_bytes, ranges, wire_bytes

# the sockets below are stand-ins whose sendto the Python data path calls; the pacing is
# the data paths' common code (pacing.send_streams)
PYTHON_PATH = datapath("python")


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

        def sendto(self, packet, flags, address):
            assert flags == pacing.CONFIRM   # the neighbour is alive: no ARP probe needed
            if self.full and self.full.pop(0):
                raise BlockingIOError(11, "Resource temporarily unavailable")
            self.sent.append(packet)

    waits = []
    monkeypatch.setattr(pacing.select, "select", lambda r, w, x, timeout: waits.append(w))
    sock = FullOnce()
    packets = [bytes([n]) * 100 for n in range(4)]
    pacing.send_streams(sock, [(("10.0.0.2", 9), packets, 1000.0)], path=PYTHON_PATH)
    assert sock.sent == packets and waits == [[sock]]


def test_a_stream_held_up_catches_up_no_faster_than_a_meter_allows():
    import time
    from syncfabric.hosts.transport import pacing

    class SlowOnce:
        """The first send is held up 200 ms (a busy CPU); every send's time is kept."""
        def __init__(self):
            self.times = []

        def sendto(self, packet, _flags, address):
            if not self.times:
                time.sleep(0.2)
            self.times.append(time.perf_counter())

    sock = SlowOnce()
    interval_s = 0.01                       # 958 + 42 wire bytes at 0.8 Mbit/s
    pacing.send_streams(sock, [(("10.0.0.2", 9), [bytes(958)] * 30, 0.8)], path=PYTHON_PATH)
    right_after = [t for t in sock.times[1:] if t - sock.times[0] < 0.005]
    # 200 ms behind: 20 datagrams at once without the bound, CATCH_UP_S's worth with it
    assert len(right_after) <= pacing.CATCH_UP_S / interval_s + 1, len(right_after)
    assert len(sock.times) == 30


def test_a_sender_awake_sends_what_falls_due_within_ahead_s_and_keeps_its_rate():
    import time

    class Recording:
        def __init__(self):
            self.times = []

        def sendto(self, _packet, _flags, _address):
            self.times.append(time.perf_counter())

    interval_s = 0.0025                     # 958 + 42 wire bytes at 3.2 Mbit/s
    for ahead_s, most_wakeups in ((0.001, 19), (0.004, 10)):
        sock, wakeups = Recording(), []
        started = time.perf_counter()
        pacing.send_streams(sock, [(("10.0.0.2", 9), [bytes(958)] * 20, 3.2)],
                            lambda seconds: (wakeups.append(seconds), time.sleep(seconds)),
                            ahead_s, start=started, path=PYTHON_PATH)
        assert len(sock.times) == 20 and len(wakeups) <= most_wakeups
        # the last leaves no earlier than its time from the start (a first datagram late
        # under load lets the next catch up: from it, the run looked too fast)
        assert sock.times[-1] - started >= 19 * interval_s - ahead_s


def test_a_window_holds_a_stream_to_what_came_back_then_sends_on_if_stalled(monkeypatch):
    """At most 5 in flight: each idle() brings 5 sums back; with nothing coming back the
    stream waits WINDOW_STALL_S and then sends on (repairs mend what was lost)."""
    class Recording:
        def __init__(self):
            self.in_flight = []

        def sendto(self, _packet, _flags, _address):
            self.in_flight.append(len(self.in_flight) - returned[0])

    returned = [0]

    def idle(_seconds):
        returned[0] += 5
    sock = Recording()
    pacing.send_streams(sock, [(("10.0.0.2", 9), [bytes(100)] * 23, 1e6)], idle, path=PYTHON_PATH,
                        window=lambda _stream, sent: 5 - sent + min(returned[0], sent))
    assert len(sock.in_flight) == 23 and max(sock.in_flight) < 5
    monkeypatch.setattr(pacing, "WINDOW_STALL_S", 0.02)
    sock, started = Recording(), time.perf_counter()
    pacing.send_streams(sock, [(("10.0.0.2", 9), [bytes(100)] * 3, 1e6)], path=PYTHON_PATH,
                        window=lambda _stream, _sent: 0)
    assert len(sock.in_flight) == 3 and time.perf_counter() - started >= 0.02
