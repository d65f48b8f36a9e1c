import hashlib

from experiments.traffic.transport import CHUNK_BYTES, chunk_count, model_bytes, ranges, wire_bytes


def test_model_is_seeded_float32_bytes():
    model = model_bytes(0.1, seed=3)
    assert len(model) == 100_000 and model == model_bytes(0.1, seed=3)
    assert hashlib.sha256(model).digest() != hashlib.sha256(model_bytes(0.1, seed=4)).digest()


def test_chunks_cover_the_model():
    assert chunk_count(CHUNK_BYTES) == 1 and chunk_count(CHUNK_BYTES + 1) == 2


def test_missing_indices_become_ranges():
    assert ranges([]) == []
    assert ranges([0, 1, 2, 5, 7, 8]) == [[0, 3], [5, 6], [7, 9]]


def test_wire_size_counts_every_header_of_every_chunk():
    # one full chunk fills a 1500-byte IP packet: 1514 bytes with the Ethernet header
    assert wire_bytes(CHUNK_BYTES) == 1514
    assert wire_bytes(CHUNK_BYTES + 1) == CHUNK_BYTES + 1 + 2 * (1514 - CHUNK_BYTES)
