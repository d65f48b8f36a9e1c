"""The hosts of experiments.host_allreduce, with no shaping and the kernel's default
offloads, alike for us and for Gloo:

- `veth`: each host in a network namespace of its own, joined by a veth pair (MTU 9000,
  or as asked, up to 65535) to one Linux bridge in a namespace of its own (multicast
  flooded: no snooping);
- `loopback`: every host in one namespace, on its own 127.0.1.x address of `lo` (whose
  MTU, 65536, holds any datagram).

Namespaces are named sfns-ha-* so that `make leftovers` removes what a dead run left.
"""

import re
import subprocess

PREFIX = "sfns-ha-"
NETWORKS = ("veth", "loopback")
MTU = 9000   # the data plane's MTU by default: jumbo frames, as NICs take them


def run(command):
    subprocess.run(command.split(), check=True, capture_output=True)


class HostNetwork:
    """Hosts `names` on network `kind` whose data plane takes datagrams of `mtu` bytes:
    addresses[name], namespace[name]; a context manager that removes what it made."""

    def __init__(self, kind, names, mtu=MTU):
        self.kind, self.names, self.mtu = kind, list(names), mtu
        if kind == "loopback":
            self.addresses = {n: "127.0.1.%d" % (i + 1) for i, n in enumerate(names)}
            self.namespace = {n: PREFIX + "lo" for n in names}
            self.interface = "lo"
        else:
            self.addresses = {n: "10.66.0.%d" % (i + 1) for i, n in enumerate(names)}
            self.namespace = {n: PREFIX + n for n in names}
            self.interface = "eth0"
        self.made = []

    def __enter__(self):
        try:
            self._make()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _make(self):
        if self.kind == "loopback":
            self._namespace(PREFIX + "lo")
            inside = "ip netns exec %slo " % PREFIX
            run(inside + "ip link set lo up multicast on")
            run(inside + "ip route add 224.0.0.0/4 dev lo")
            return
        switch = self._namespace(PREFIX + "sw")
        run("ip netns exec %s ip link add br0 type bridge mcast_snooping 0" % switch)
        run("ip netns exec %s ip link set br0 up" % switch)
        for i, name in enumerate(self.names):
            host = self._namespace(self.namespace[name])
            run("ip link add ha%d type veth peer name ha%db" % (i, i))
            run("ip link set ha%d netns %s" % (i, host))
            run("ip link set ha%db netns %s" % (i, switch))
            run("ip netns exec %s ip link set ha%db mtu %d master br0 up" % (switch, i, self.mtu))
            inside = "ip netns exec %s " % host
            run(inside + "ip link set ha%d name eth0" % i)
            run(inside + "ip link set eth0 mtu %d up" % self.mtu)
            run(inside + "ip link set lo up")
            run(inside + "ip addr add %s/24 dev eth0" % self.addresses[name])
            run(inside + "ip route add 224.0.0.0/4 dev eth0")

    def _namespace(self, name):
        run("ip netns add %s" % name)
        self.made.append(name)
        return name

    def __exit__(self, *_exception):
        for name in reversed(self.made):   # a namespace takes its veth ends with it
            subprocess.run(["ip", "netns", "delete", name], capture_output=True)
        self.made = []

    def command(self, name, argv):
        """argv run in host `name`'s namespace."""
        return ["ip", "netns", "exec", self.namespace[name], *argv]

    def rcvbuf_errors(self):
        """UDP datagrams dropped for a full receive buffer, over every host's namespace."""
        return sum(udp_counter(namespace, "RcvbufErrors")
                   for namespace in sorted(set(self.namespace.values())))


def udp_counter(namespace, field):
    """A counter of the Udp line of /proc/net/snmp in `namespace`."""
    snmp = subprocess.run(["ip", "netns", "exec", namespace, "cat", "/proc/net/snmp"],
                          capture_output=True, text=True, check=True).stdout
    names, values = [re.split(r"\s+", line.strip()) for line in snmp.splitlines()
                     if line.startswith("Udp:")][:2]
    return int(values[names.index(field)])
