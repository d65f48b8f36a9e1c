"""Model bytes on the wire: numbered UDP chunks (round, chunk index, chunk count) that
fill the data plane's MTU, and what they cost on the links."""

import os
import struct

import numpy as np

DATA_PORT = 7001
HEADER = struct.Struct("!III")           # round, chunk index, chunk count
FRAME_OVERHEAD = 14 + 20 + 8                # Ethernet, IP and UDP headers of a datagram
WIRE_OVERHEAD = FRAME_OVERHEAD + HEADER.size  # ... and our chunk header
MTU_ENV = "SYNCFABRIC_MTU"   # the data plane's MTU; the testbed sets it for the programs in hosts


def data_mtu():
    return int(os.environ.get(MTU_ENV, "1500"))


def chunk_payload_bytes():
    """The UDP payload that fills one data-plane MTU."""
    return data_mtu() - 20 - 8


def chunk_bytes():
    """The model bytes one chunk carries: a datagram that fills the data-plane MTU (1460
    at 1500; senders and receivers of a run see the same MTU_ENV)."""
    return chunk_payload_bytes() - HEADER.size


def model_bytes(model_mb, seed=0):
    """model_mb megabytes (1e6) of float32 parameters."""
    count = int(model_mb * 1e6) // 4
    return np.random.default_rng(seed).standard_normal(count, dtype=np.float32).tobytes()


def chunk_count(size):
    return -(-size // chunk_bytes())


def wire_bytes(size):
    """Bytes a `size`-byte payload takes on the links (what meters and shapers count)."""
    return size + chunk_count(size) * WIRE_OVERHEAD


def ranges(indices):
    """Sorted indices as [[first, last_exclusive], ...]."""
    result = []
    for index in indices:
        if result and result[-1][1] == index:
            result[-1][1] += 1
        else:
            result.append([index, index + 1])
    return result


def chunk_packets(number, data, indices):
    """Datagrams carrying chunks `indices` of `data` in round `number`."""
    chunks, size = chunk_count(len(data)), chunk_bytes()
    view = memoryview(data)
    return [HEADER.pack(number, index, chunks) + view[index * size:(index + 1) * size]
            for index in indices]
