"""The host data path: how a host's datagrams leave, arrive and are summed. Every host
program goes through it (pacing.send_streams, receivers.datagrams, job_roles' summing
nodes, a worker's returned sums), behind one interface with two implementations:

- `python` (python.py): the reference and the fallback, a system call and a numpy call
  per datagram;
- `native` (native.py over _native.c): datagrams in batches (recvmmsg, sendmmsg), UDP
  GSO and GRO where the kernel and the path allow, fragments built and summed in C with
  the GIL released.

Both keep the wire format and every rule of a summing node, so hosts of either kind
take part in one job. SYNCFABRIC_DATAPATH=native|python chooses (default: native where
it was built; without it, python with one warning). SYNCFABRIC_GSO=on|off turns the
native path's GSO and GRO off (default on). docs/datapath.md tells more.

The operations (each implementation's class documents them):
- receive(sock) -> a batch of the datagrams waiting (count, packet(i), source(i));
- sum_fragments(batch, node) -> what a summing node's accumulators made of the batch;
- place_sums(batch, returned) -> what a worker took back of its shard's sums;
- fragments(...) -> datagrams of float32 fragments; send(sock, datagrams, first, stop,
  address) -> how many left (pacing.send_streams paces them).
"""

import functools
import importlib
import logging
import os

DATAPATH_ENV = "SYNCFABRIC_DATAPATH"
GSO_ENV = "SYNCFABRIC_GSO"
NAMES = ("native", "python")
LOG = logging.getLogger("syncfabric.hosts")


def native_built():
    """Whether the C extension was built (pip install builds it where gcc is)."""
    try:
        importlib.import_module("syncfabric.hosts.datapath._native")
    except ImportError:
        return False
    return True


def gso_wanted():
    value = os.environ.get(GSO_ENV, "on")
    if value not in ("on", "off"):
        raise ValueError("%s=%r: say on or off" % (GSO_ENV, value))
    return value == "on"


def datapath(name=None):
    """The data path `name` (default: SYNCFABRIC_DATAPATH, else native where built)."""
    name = name or os.environ.get(DATAPATH_ENV) or None
    if name is not None and name not in NAMES:
        raise ValueError("%s=%r: choose one of %s" % (DATAPATH_ENV, name, ", ".join(NAMES)))
    return _datapath(name, gso_wanted())


@functools.cache
def _datapath(name, gso):
    if name in (None, "native") and native_built():
        from syncfabric.hosts.datapath.native import NativeDatapath
        return NativeDatapath(gso)
    if name == "native" or name is None:
        LOG.warning("the native data path is not built here: the Python data path runs, "
                    "at a fraction of the rate (install gcc and the Python headers, then "
                    "pip install again)")
    from syncfabric.hosts.datapath.python import PythonDatapath
    return PythonDatapath()
