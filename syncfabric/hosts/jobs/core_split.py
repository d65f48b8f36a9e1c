"""A summing node split over its host's cores (the aggregator daemon's --cores N): each
core sums its own share of the node's fragments, on its own socket of the node's port.

The fragments are cut into blocks of BLOCK_FRAGMENTS; block b is core b % N's, so that
every core has a share of each part of a round as the workers send it in order. The
kernel steers each datagram to its core: the port's sockets share it (SO_REUSEPORT) and
a classic BPF program on the port's group picks the socket from the fragment index in
the datagram's header (a control message goes to core 0). SO_REUSEPORT alone would pick
by source address, so one worker's fragments would all land on one core.

A GSO run is steered as one datagram, by its first: the native sender never puts two
blocks in one run (_native.c, send_batch). A datagram that reaches another core anyway
(a NIC's GRO may merge across blocks) is handed to its own core by the node
(SummingNode.handoff), so it is never lost, only slower.
"""

import ctypes
import socket
import struct
from dataclasses import dataclass

import numpy as np

from syncfabric.hosts.transport.receivers import receiving_socket

BLOCK_FRAGMENTS = 64          # _native.c's BLOCK_FRAGMENTS
SO_ATTACH_REUSEPORT_CBPF = 51   # linux/socket.h (Python's socket module lacks it)
CONTROL_WORD = 0x53464A43     # job_roles.CONTROL_MAGIC, b"SFJC", as a big-endian word
FRAGMENT_INDEX_OFFSET = 8     # gradient_wire.HEADER: job, round, then the fragment index

# classic BPF (linux/filter.h): the instructions' opcodes
LOAD_WORD = 0x20      # BPF_LD | BPF_W | BPF_ABS: A = the payload's word at k
JUMP_IF_EQUAL = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
DIVIDE = 0x34         # BPF_ALU | BPF_DIV | BPF_K
MODULO = 0x94         # BPF_ALU | BPF_MOD | BPF_K
RETURN_A = 0x16       # BPF_RET | BPF_A
RETURN_K = 0x06       # BPF_RET | BPF_K


@dataclass(frozen=True)
class CoreShare:
    """Which share of a summing node's fragments a node object sums: core `core` of
    `cores`. handoff(core, packet, source) gives a datagram to that core's node, to be
    taken in its own thread (the daemon's serving loops)."""
    core: int = 0
    cores: int = 1
    handoff: object = None


WHOLE = CoreShare()   # a node on one core: every fragment is its own


def core_of(index, cores):
    """The core that sums fragment `index` when a node runs on `cores` cores."""
    return (index // BLOCK_FRAGMENTS) % cores


def core_expected(expected, core, cores):
    """A node's expected workers per fragment (an array over the job's fragments), with
    every fragment of another core's blocks zeroed: the share `core` sums."""
    blocks = np.arange(len(expected)) // BLOCK_FRAGMENTS % cores
    return np.where(blocks == core, expected, 0).astype(expected.dtype)


def steering_program(cores):
    """The classic BPF program that returns a datagram's core: 0 for a control message
    (or a datagram too short for a header, which the program cannot read), else the
    core of its fragment index. The kernel runs it on the UDP payload."""
    instructions = [
        (LOAD_WORD, 0, 0, 0),
        (JUMP_IF_EQUAL, 4, 0, CONTROL_WORD),   # a control message: to "return 0" below
        (LOAD_WORD, 0, 0, FRAGMENT_INDEX_OFFSET),
        (DIVIDE, 0, 0, BLOCK_FRAGMENTS),
        (MODULO, 0, 0, cores),
        (RETURN_A, 0, 0, 0),
        (RETURN_K, 0, 0, 0),
    ]
    return b"".join(struct.pack("HBBI", *instruction) for instruction in instructions)


def attach_steering(sock, cores):
    """Attach steering_program to the port group `sock` belongs to; the group's sockets
    are numbered in the order they were bound."""
    program = ctypes.create_string_buffer(steering_program(cores))
    count = len(program.raw) // 8
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF,
                    struct.pack("HL", count, ctypes.addressof(program)))


def core_sockets(address, port, cores):
    """One receiving socket per core on address:port, socket i core i's. One core: a
    socket of its own, as ever. OSError (all closed) when the port is taken."""
    if cores == 1:
        return [receiving_socket(address, port, reuse=False)]
    sockets = []
    try:
        for _core in range(cores):   # bound in order: the group numbers them so
            sockets.append(receiving_socket(address, port, reuse=False, share_port=True))
        attach_steering(sockets[0], cores)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets
