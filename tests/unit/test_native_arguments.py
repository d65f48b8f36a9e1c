"""The native data path's C API checks its arguments before it touches a byte: arrays
too small, of the wrong type or misaligned, ranges outside their buffers, sizes that
overflow, wire fields past 32 bits and layouts whose fragment count disagrees with their
floats each raise ValueError or TypeError with a message, where they used to crash or
write out of bounds."""

import socket

import numpy as np
import pytest

_native = pytest.importorskip("syncfabric.hosts.datapath._native")

I64, U32, U64, F32 = np.int64, np.uint32, np.uint64, np.float32


@pytest.fixture
def sock():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    yield sock
    sock.close()


def receive(sock, buffer=None, slot_bytes=65536, entries=128, offsets=None):
    return _native.recv_batch(sock.fileno(), bytearray(65536) if buffer is None else buffer,
                              slot_bytes, np.zeros(entries, I64) if offsets is None else offsets,
                              np.zeros(entries, I64), np.zeros(entries, U32),
                              np.zeros(entries, np.uint16))


def test_a_receive_needs_room_for_a_whole_gro_datagram_and_a_slot_it_can_fill(sock):
    with pytest.raises(ValueError, match="offsets holds 64 bytes, 1024 needed"):
        receive(sock, entries=8)
    for slot_bytes in (0, -1, 65537):
        with pytest.raises(ValueError, match="give a positive slot size the buffer holds"):
            receive(sock, slot_bytes=slot_bytes)
    with pytest.raises(TypeError, match="offsets holds items of format 'I', not int64"):
        receive(sock, offsets=np.zeros(128, U32))
    with pytest.raises(TypeError, match="not bytes"):
        receive(sock, buffer=np.zeros(16384, F32))


def test_arrays_misaligned_for_their_type_are_refused(sock):
    raw = np.zeros(129 * 8 + 1, np.uint8)
    misaligned = raw[1:].view(I64)   # numpy allows it; C would read it as int64*
    assert misaligned.ctypes.data % 8
    with pytest.raises(ValueError, match="offsets is not aligned for int64"):
        receive(sock, offsets=misaligned)


def send(sock, first, stop, offsets=(0, 90), lengths=(10, 10), buffer=b"x" * 100, payload=None,
         payload_offsets=(0, 0), payload_lengths=(0, 0), **kw):
    return _native.send_batch(sock.fileno(), buffer, np.array(offsets, I64),
                              np.array(lengths, I64), payload, np.array(payload_offsets, I64),
                              np.array(payload_lengths, I64), first, stop,
                              kw.get("address", 0x7F000001), kw.get("port", 9), False)


def test_a_send_refuses_ranges_outside_its_datagrams_and_sizes_that_overflow(sock):
    with pytest.raises(ValueError, match="a datagram lies outside the buffer"):
        send(sock, 0, 2, lengths=(10, 20))
    with pytest.raises(ValueError, match="give 0 <= first <= stop"):
        send(sock, -1, 2)
    with pytest.raises(ValueError, match="give 0 <= first <= stop"):
        send(sock, 2, 1)
    with pytest.raises(ValueError, match="offsets holds 16 bytes, 24 needed"):
        send(sock, 0, 3)
    with pytest.raises(ValueError, match="a datagram lies outside the buffer"):
        send(sock, 0, 2, offsets=(2 ** 63 - 5, 0))   # offset + length overflows
    with pytest.raises(ValueError, match="a datagram lies outside the buffer"):
        send(sock, 0, 1, offsets=(0,), lengths=(70000,), buffer=b"x" * 70000)   # not one datagram
    with pytest.raises(ValueError, match="the wire carries 32 bits"):
        send(sock, 0, 2, address=2 ** 32)
    with pytest.raises(ValueError, match="a port in 0..65535"):
        send(sock, 0, 2, port=65536)


def test_a_send_refuses_payload_pieces_outside_their_array_or_too_long_for_udp(sock):
    floats = np.zeros(100, F32)   # 400 bytes
    assert send(sock, 0, 2, payload=floats, payload_lengths=(400, 8)) == 2
    with pytest.raises(ValueError, match="a datagram lies outside the buffer"):
        send(sock, 0, 2, payload=floats, payload_offsets=(0, 396), payload_lengths=(4, 8))
    with pytest.raises(ValueError, match="a datagram lies outside the buffer"):
        send(sock, 0, 2, payload=floats, payload_offsets=(-4, 0), payload_lengths=(4, 4))
    with pytest.raises(ValueError, match="payload lengths holds 8 bytes, 16 needed"):
        send(sock, 0, 2, payload=floats, payload_lengths=(4,))
    huge = np.zeros(65500 // 4, F32)
    with pytest.raises(ValueError, match="datagram 1 of 65510 bytes: UDP carries 65507"):
        send(sock, 0, 2, payload=huge, payload_lengths=(4, 65500))
    with pytest.raises(TypeError, match="payload holds items of format 'B', not float32"):
        send(sock, 0, 2, payload=bytearray(400))


def build(per_fragment=10, floats=40, count=4, number=3, indices=(0, 1), buffer=None,
          pieces=None):
    n = len(indices)
    pieces = [np.zeros(n, I64) for _piece in range(4)] if pieces is None else pieces
    return _native.build_fragments(bytearray(1000) if buffer is None else buffer, *pieces, 7,
                                   number, count, np.array(indices, U32), np.ones(n, U64),
                                   np.zeros(40, F32), np.array(indices, I64) * 10, per_fragment,
                                   floats)


def test_building_writes_headers_and_names_the_floats_where_they_lie():
    pieces = [np.zeros(2, I64) for _piece in range(4)]
    buffer = bytearray(48)
    assert build(per_fragment=10, floats=35, indices=(3, 1), buffer=buffer, pieces=pieces) == 2
    offsets, lengths, payload_offsets, payload_lengths = (piece.tolist() for piece in pieces)
    assert (offsets, lengths) == ([0, 24], [24, 24])
    assert (payload_offsets, payload_lengths) == ([120, 40], [20, 40])   # the last is short
    assert buffer[8:12] == (3).to_bytes(4, "big") and buffer[32:36] == (1).to_bytes(4, "big")


def test_building_refuses_empty_or_huge_fragments_and_rounds_past_32_bits():
    assert build() == 2
    for per_fragment in (0, -3, 2 ** 62):
        with pytest.raises(ValueError, match="give at least one float a fragment"):
            build(per_fragment=per_fragment)
    with pytest.raises(ValueError, match="the wire carries 32 bits"):
        build(number=2 ** 32 + 1)
    with pytest.raises(ValueError, match="the wire carries 32 bits"):
        build(number=-1)
    with pytest.raises(ValueError, match="buffer holds 40 bytes, 48 needed"):
        build(buffer=bytearray(40))
    with pytest.raises(ValueError, match="payload offsets holds 8 bytes, 16 needed"):
        build(pieces=[np.zeros(2, I64), np.zeros(2, I64), np.zeros(1, I64), np.zeros(2, I64)])


def summing(rounds=(), count=4, per_fragment=10, floats=40, slots=None, status=None):
    offsets, lengths = np.array([0], I64), np.array([0], I64)
    return _native.sum_fragments(bytearray(100), offsets, lengths, np.zeros(1, U32), 0, 1, 7,
                                 count, per_fragment, floats, 40,
                                 np.zeros(count, I64) if slots is None else slots,
                                 np.zeros(1, U32), np.zeros(1, U64), np.zeros(count, U64),
                                 list(rounds), -1, 2 ** 32 - 1,
                                 np.zeros(1, np.int8) if status is None else status,
                                 np.zeros(2, I64))


def test_summing_refuses_a_layout_that_disagrees_with_its_floats_and_bad_rounds():
    assert summing()[0] == 1
    with pytest.raises(ValueError, match="slots holds 24 bytes, 32 needed"):
        summing(slots=np.zeros(3, I64))
    with pytest.raises(ValueError, match="5 fragments of 10 floats cannot hold exactly 40"):
        summing(count=5, slots=np.zeros(5, I64))
    with pytest.raises(ValueError, match="both must be positive"):
        summing(per_fragment=0)
    with pytest.raises(ValueError, match="the wire carries 32 bits"):
        summing(rounds=[(2 ** 32 + 1, np.zeros(40, F32), np.zeros(4, U64))])
    with pytest.raises(TypeError, match="have holds items of format '\\?', not uint64"):
        summing(rounds=[(1, np.zeros(40, F32), np.zeros(4, bool))])
    with pytest.raises(TypeError, match="a round's floats holds items of format 'd', not float32"):
        summing(rounds=[(1, np.zeros(40), np.zeros(4, U64))])
    with pytest.raises(TypeError, match="status holds items of format 'B', not int8"):
        summing(status=bytearray(1))


def test_placing_refuses_a_layout_whose_last_fragment_would_be_empty():
    """With 5 fragments of 10 floats for 40 floats, a bare 24-byte header would count as
    fragment 4's sum; the layout is refused instead."""
    def place(count, floats):
        header = bytearray(24)
        return _native.place_sums(header, np.array([0], I64), np.array([24], I64),
                                  np.array([0x7F000001], U32), 1, 0x7F000001, 7, 1, 0, count,
                                  count, 10, floats, np.arange(count, dtype=I64), [])
    assert place(4, 40) == []
    with pytest.raises(ValueError, match="cannot hold exactly 40 floats"):
        place(5, 40)
