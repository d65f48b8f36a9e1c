"""The fabric's two traffic classes as tc builds them on the emulated fabric
(mininet_topos/traffic_classes.py), their counters read back, and the DSCP they share
with the switches' flows and the hosts' sockets (syncfabric/traffic_classes.py)."""

import pytest

from mininet_topos.traffic_classes import (BORROWED_QUEUE, assured_rates, class_commands,
                                           class_rates, queue_counters, rate_commands)
from syncfabric.traffic_classes import BORROWED_DSCP, tos_byte

TC_QDISC_SHOW = """qdisc htb 5: root refcnt 3 r2q 10 default 0x10 direct_packets_stat 0 direct_qlen 1000
 Sent 11308284 bytes 1416 pkt (dropped 0, overlimits 2217 requeues 0)
 backlog 0b 0p requeues 0
qdisc pfifo_head_drop 10: parent 5:10 limit 256p
 Sent 4786222 bytes 605 pkt (dropped 0, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
qdisc pfifo_head_drop 20: parent 5:20 limit 64p
 Sent 6522062 bytes 811 pkt (dropped 37, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
"""


def test_a_switch_port_gets_a_guaranteed_class_served_first_and_a_borrowed_one():
    commands = class_commands("leaf1-eth3", 20.0, frames=256)
    assert commands[:3] == [   # HTB's default is the guaranteed class, not Mininet's 5:1
        "qdisc del dev leaf1-eth3 root",
        "qdisc add dev leaf1-eth3 root handle 5: htb default 10",
        "class add dev leaf1-eth3 parent 5: classid 5:1 htb rate 20.000000Mbit burst 15k"]
    guaranteed, borrowed = commands[3:5]
    # no floors known yet: the guaranteed class is assured the whole link (strict priority)
    assert "classid 5:10 htb rate 20000kbit ceil 20.000000Mbit prio 0" in guaranteed
    assert "classid 5:20 htb rate 8kbit ceil 20.000000Mbit prio 1" in borrowed
    assert "parent 5:10 handle 10: pfifo_head_drop limit 256" in commands[5]
    assert "parent 5:20 handle 20: pfifo_head_drop limit %d" % BORROWED_QUEUE in commands[6]
    assert commands[7] == ("filter add dev leaf1-eth3 parent 5: protocol ip prio 1 u32 match "
                           "ip dsfield 0x04 0xfc flowid 5:20")


def test_a_hosts_guaranteed_class_keeps_the_kernels_queue():
    commands = class_commands("h1-eth0", 20.0)
    assert not any("parent 5:10 handle" in command for command in commands)
    assert any("parent 5:20 handle 20: pfifo_head_drop" in command for command in commands)


def test_a_reshaped_link_moves_both_classes():
    guaranteed, borrowed = rate_commands("leaf1-eth3", 40.0)
    assert "class change dev leaf1-eth3 parent 5:1 classid 5:10 htb rate 40000kbit ceil " \
        "40.000000Mbit prio 0" in guaranteed
    assert "classid 5:20 htb rate 8kbit ceil 40.000000Mbit prio 1" in borrowed


def test_the_guaranteed_class_is_assured_the_booked_floors_and_the_borrowed_what_they_leave():
    assert class_rates(20.0, 8.0) == (8800, 11200)       # FLOOR_HEADROOM over the floors
    assert class_rates(20.0, 0.0) == (8, 19992)          # nothing booked: HTB's least
    assert class_rates(20.0, 19.5) == (20000, 8)         # floors and headroom beyond the link
    guaranteed, borrowed = rate_commands("leaf1-eth3", 20.0, 8.0)
    assert "classid 5:10 htb rate 8800kbit ceil 20.000000Mbit prio 0" in guaranteed
    assert "classid 5:20 htb rate 11200kbit ceil 20.000000Mbit prio 1" in borrowed


TC_CLASS_SHOW = """class htb 5:10 parent 5:1 prio 0 rate 8800Kbit ceil 20Mbit burst 1598b cburst 1600b
class htb 5:1 root rate 20Mbit ceil 20Mbit burst 1600b cburst 1600b
class htb 5:20 parent 5:1 leaf 20: prio 1 rate 11200Kbit ceil 20Mbit burst 1600b cburst 1600b
"""


def test_each_classes_assured_rate_is_read_from_tc():
    assert assured_rates(TC_CLASS_SHOW) == {"guaranteed": 8800, "borrowed": 11200}
    assert assured_rates(TC_CLASS_SHOW.replace("8800Kbit", "20Mbit")) == {
        "guaranteed": 20000, "borrowed": 11200}


def test_each_classes_bytes_and_drops_are_read_from_its_queue():
    assert queue_counters(TC_QDISC_SHOW) == {
        "guaranteed": {"bytes": 4786222, "packets": 605, "dropped": 0},
        "borrowed": {"bytes": 6522062, "packets": 811, "dropped": 37}}


def test_the_borrowed_class_is_rfc_8622s_lower_effort_in_the_tos_byte():
    assert (BORROWED_DSCP, tos_byte(BORROWED_DSCP)) == (1, 0x04)
    with pytest.raises(ValueError, match="0 to 63"):
        tos_byte(64)


def test_the_deployment_guides_classes_are_the_emulated_fabrics():
    """docs/deploy.md's tc lines for a real port are class_commands' for a host-like port
    (the kernel's queue for the guaranteed class), the rate written LINK."""
    from experiments import deploy_guide

    in_guide = [command for command in deploy_guide.guide_commands(deploy_guide.GUIDE.read_text())
                if command.startswith("tc ")]
    assert in_guide == ["tc " + command.replace("1000.000000Mbit", "LINK").replace(
                            "1000000kbit", "LINK") for command in class_commands("PORT", 1000.0)]
