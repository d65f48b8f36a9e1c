"""Drop attribution by layer, on counter dumps as each layer prints them (taken from a run
on an 8x8 fabric, cut short), and the fidelity verdict that names the layers."""

import os
import time

import pytest

from experiments import fidelity, packet_drops
from experiments.fidelity import Usage, verdict
from mininet_topos.data_plane import ovs_transmit_buffer

COVERAGE = """Event coverage, avg rate over last: 5 seconds, last minute, last hour,  hash=fdbf83f8:
bridge_reconfigure         8.6/sec     6.350/sec        0.1058/sec   total: 381
datapath_drop_meter        0.0/sec     0.000/sec        0.0000/sec   total: 40
datapath_drop_userspace_action_error   0.0/sec     0.000/sec        0.0000/sec   total: 335
drop_action_of_pipeline    0.0/sec     0.000/sec        0.0000/sec   total: 45
datapath_drop_tunnel_pop_error   0.0/sec     0.000/sec        0.0000/sec   total: 2
netdev_sent              120.0/sec    40.000/sec        0.6000/sec   total: 3627
"""

DPCTL = """netdev@ovs-netdev:
  lookups: hit:5279 missed:782 lost:3
  flows: 782
  port 0: ovs-netdev (tap)
    RX packets:0 errors:0 dropped:0 overruns:0 frame:0
    TX packets:0 errors:0 dropped:0 aborted:0 carrier:0
    collisions:0
  port 1: leaf1-eth5
    RX packets:31 errors:0 dropped:4 overruns:0 frame:0
    TX packets:31 errors:1 dropped:2 aborted:0 carrier:0
    collisions:0
"""

SS = """Netid Recv-Q Send-Q Local Address:Port        Peer Address:PortProcess
p_raw 0      0                [0]:*                       *     users:(("ovs-vswitchd",pid=14901,fd=248)) skmem:(r0,rb212992,t0,tb16777216,f0,w0,o0,bl0,d0)
p_raw 0      0                  *:leaf1-eth5              *     users:(("ovs-vswitchd",pid=14901,fd=38)) skmem:(r0,rb212992,t0,tb16777216,f0,w0,o176,bl0,d7)
p_raw 0      0                  *:leaf1-eth3              *     users:(("ovs-vswitchd",pid=14901,fd=39)) skmem:(r0,rb212992,t0,tb16777216,f0,w0,o176,bl0,d5)
p_raw 0      0                  *:eth0                    *     users:(("dhclient",pid=99,fd=3)) skmem:(r0,rb212992,t0,tb212992,f0,w0,o0,bl0,d100)
"""

PACKET = """sk               RefCnt Type Proto  Iface R Rmem   User   Inode
000000001bffef0b 2      3    0000   0     0 9999999 0      112110979
000000002d1e3ec6 3      3    0003   35887 1 278528 0      118726438
000000002e685221 3      3    0003   35885 1 17408  0      118726439
"""

IP_LINK = """1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000
    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00
    RX:  bytes packets errors dropped  missed   mcast
             0       0      0       9       0       0
    TX:  bytes packets errors dropped carrier collsns
             0       0      0       9       0       0
2: h1-eth0@if2165: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc htb state UP mode DEFAULT group default qlen 1000
    link/ether 00:00:00:00:00:01 brd ff:ff:ff:ff:ff:ff link-netnsid 0
    RX:  bytes packets errors dropped  missed   mcast
       1083346     144      0       3       0       0
    TX:  bytes packets errors dropped carrier collsns
        271006      37      0       2       0       0
"""

TC = """qdisc htb 5: dev leaf1-eth9 root refcnt 3 r2q 10 default 0x1 direct_packets_stat 0 direct_qlen 1000
 Sent 572392 bytes 85 pkt (dropped 11, overlimits 74 requeues 0)
 backlog 0b 0p requeues 0
qdisc pfifo_head_drop 10: dev leaf1-eth9 parent 5:1 limit 128p
 Sent 572392 bytes 85 pkt (dropped 11, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
qdisc htb 5: dev leaf1-eth10 root refcnt 3 r2q 10 default 0x1 direct_packets_stat 0 direct_qlen 1000
 Sent 100 bytes 2 pkt (dropped 1, overlimits 0 requeues 0)
"""

SOFTNET = ("00022330 00000010 00000000 00000000 00000000 00000000 00000000 00000000\n"
           "0002da6d 00000002 00000000 00000000 00000000 00000000 00000000 00000000\n")

SNMP = ("Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\n"
        "Udp: 10 0 2 5 3 4\n")

LOG = """2026-11-25T14:08:15.892Z|05861|netdev_linux|WARN|Dropped 143 log messages in last 8 seconds (most recently, 6 seconds ago) due to excessive rate
2026-11-25T14:08:15.892Z|05862|netdev_linux|WARN|error sending Ethernet packet on spine2-eth1: Resource temporarily unavailable
2026-11-25T14:08:15.893Z|05863|netdev_linux|WARN|error sending Ethernet packet on leaf7-eth6: Resource temporarily unavailable
2026-11-25T14:08:15.900Z|05864|bridge|INFO|bridge leaf8: deleted interface leaf8-eth9 on port 9
"""


def test_each_layer_is_read_from_its_own_text():
    coverage = packet_drops.coverage_drops(COVERAGE)
    assert coverage == {"datapath_drop_meter": 40, "datapath_drop_userspace_action_error": 335,
                        "drop_action_of_pipeline": 45, "datapath_drop_tunnel_pop_error": 2}
    assert packet_drops.datapath_layers(coverage) == {"ovs-datapath": 47, "meter": 40, "control": 335}
    assert packet_drops.lookups_lost(DPCTL) == 3
    assert packet_drops.port_drops(DPCTL) == 4 + 1 + 2
    assert packet_drops.packet_socket_drops(SS) == 12          # OVS's sockets only
    assert packet_drops.link_drops(IP_LINK) == 5                # loopback apart
    assert packet_drops.qdisc_drops(TC) == 12                  # the HTB roots count their queues'
    assert packet_drops.softnet_drops(SOFTNET) == 18            # hexadecimal
    assert packet_drops.udp_socket_drops(SNMP) == 5             # the send buffer's are retried
    assert packet_drops.send_failures(LOG) == 2


def test_ovs_transmit_socket_is_the_one_bound_to_no_interface():
    assert ovs_transmit_buffer(SS) == 16777216
    assert ovs_transmit_buffer(SS.replace("[0]:*", "*:eth9")) is None     # not opened yet


def _counters(**layers):
    counts = dict.fromkeys(packet_drops.DATA_LAYERS + (packet_drops.CONTROL,), 0)
    counts.update(layers, log_offset=0)
    return counts


def test_drops_between_two_readings_by_layer(monkeypatch):
    monkeypatch.setattr(packet_drops, "_log_since", lambda offset: LOG)
    before = _counters(qdisc=10, meter=5, control=300, veth=2)
    after = _counters(qdisc=25, meter=5, control=335, veth=1, softnet=4)
    drops = packet_drops.dropped_between(before, after)
    assert drops["qdisc"] == 15 and drops["ovs-transmit"] == 2 and drops["softnet"] == 4
    assert drops["veth"] == 0          # a counter that went down (an interface gone) counts nothing
    assert drops["control"] == 35
    assert packet_drops.data_drops(drops) == 21                  # never the control drops
    assert packet_drops.where(drops) == "ovs-transmit:2 qdisc:15 softnet:4 control:35"


def test_the_verdict_names_the_layers_and_ignores_control_drops():
    explained = Usage(ovs_cpu=0.5, machine_busy=0.5, drops={"qdisc": 290, "ovs-transmit": 10})
    row = verdict(8.0, 8.0, 0.03, 300, explained)
    assert row["fidelity_ok"] and row["unexplained_loss"] == 0.0
    assert row["dropped_at"] == "qdisc:290 ovs-transmit:10"
    arp = Usage(ovs_cpu=0.5, machine_busy=0.5, drops={"control": 300})
    row = verdict(8.0, 8.0, 0.03, 300, arp)
    assert not row["fidelity_ok"] and row["unexplained_loss"] == pytest.approx(0.03)
    assert "3.00% first-pass loss no counter explains (control:300)" in row["fidelity_reason"]
    small = verdict(8.0, 8.0, 0.002, 20, Usage(ovs_cpu=0.5, machine_busy=0.5))
    assert not small["fidelity_ok"] and "no layer counted a drop" in small["fidelity_reason"]


def test_make_ovs_starts_ovs_with_the_data_planes_buffers():
    from pathlib import Path

    from mininet_topos.data_plane import DataPlane
    makefile = (Path(__file__).parents[2] / "Makefile").read_text()
    assert "net.core.wmem_default=%d" % DataPlane().ovs_send_buffer in makefile
    assert "net.core.rmem_default=%d" % DataPlane().ovs_receive_buffer in makefile


def test_the_receive_backlog_is_the_fullest_bound_packet_socket():
    assert packet_drops.receive_backlog(PACKET) == 278528   # the unbound socket is not a port's
    assert packet_drops.receive_backlog(PACKET.splitlines()[0]) == 0


def test_the_backlog_watch_keeps_when_one_socket_held_the_most(tmp_path):
    table = tmp_path / "packet"
    table.write_text(PACKET)
    watch = fidelity.BacklogWatch(table).start()
    time.sleep(5 * fidelity.BACKLOG_SAMPLE_S)
    changed = time.time()
    table.write_text(PACKET.replace("278528", "0"))
    time.sleep(5 * fidelity.BACKLOG_SAMPLE_S)
    samples = watch.stop()
    assert [at for at, _most in samples] == sorted(at for at, _most in samples)
    assert max(most for _at, most in samples) == 278528
    assert all(most < 278528 for at, most in samples if at > changed + fidelity.BACKLOG_SAMPLE_S)


def test_switch_port_queues_fit_in_ovs_transmit_socket_or_shorten_or_fail():
    from mininet_topos.data_plane import BASELINE, DataPlane, frame_truesize
    from mininet_topos.platform_net import PlatformError, switch_ports
    from mininet_topos.spineleaf import SpineLeafTopo

    assert frame_truesize(9000) == 16640 and frame_truesize(1500) == 2304
    assert switch_ports(SpineLeafTopo(spines=8, leaves=8, hosts_per_leaf=4, bw=10)) == 8 * 8 + 8 * 12
    from mininet_topos.traffic_classes import BORROWED_QUEUE

    plane = DataPlane()
    assert plane.port_queue(160) == plane.switch_queue           # 8x8, 4 hosts a leaf
    assert plane.port_queue(160) * 160 * 16640 <= plane.ovs_send_buffer
    assert plane.port_queue(400) == plane.ovs_send_buffer // (400 * 16640) < plane.switch_queue
    classes = DataPlane(traffic_classes=True)   # both classes' queues full at once, every port
    assert (classes.port_queue(160) + BORROWED_QUEUE) * 160 * 16640 <= classes.ovs_send_buffer
    assert classes.port_queue(400) == plane.port_queue(400) - BORROWED_QUEUE
    assert BASELINE.port_queue(160) == 0                          # the kernel's queues, as before
    with pytest.raises(PlatformError, match="needs a larger buffer"):
        DataPlane(ovs_send_buffer=16 << 20).port_queue(160)


def test_a_process_name_that_is_not_utf8_in_ss_s_listing_reads_as_the_rest(tmp_path, monkeypatch):
    """ss -p names every process with a packet socket in the bytes it chose: under a load
    such as stress-ng's, one that is not UTF-8 killed a fabric's start with a decoding
    error."""
    from mininet_topos import data_plane
    fake_ss = tmp_path / "ss"
    listing = SS.encode() + b'\np_raw UNCONN 0 0 *:eth1 *  users:(("\x8f\xfe\xff",pid=7,fd=3))\n'
    fake_ss.write_text("#!/bin/sh\ncat %s\n" % (tmp_path / "listing"))
    (tmp_path / "listing").write_bytes(listing)
    fake_ss.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    assert data_plane._current_transmit_buffer() == 16777216
    assert packet_drops.packet_socket_drops(packet_drops._run("ss", "-0", "-m", "-p", "-n")) == 12
