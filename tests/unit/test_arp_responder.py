from scapy.layers.l2 import ARP, Ether

from apps.arp_responder import arp_reply
from tests.harness.fabrics import spine_leaf_view

VIEW = spine_leaf_view(2, 2, 1)


def request(target_ip, sender_ip="10.0.0.1", sender_mac="00:00:00:00:00:01", op="who-has"):
    return bytes(Ether(src=sender_mac, dst="ff:ff:ff:ff:ff:ff")
                 / ARP(op=op, hwsrc=sender_mac, psrc=sender_ip, pdst=target_ip))


def test_request_for_known_host_gets_its_mac():
    reply = Ether(arp_reply(VIEW, request("10.0.0.2")))
    assert reply.dst == "00:00:00:00:00:01" and reply.src == "00:00:00:00:00:02"
    assert reply[ARP].op == 2
    assert (reply[ARP].hwsrc, reply[ARP].psrc) == ("00:00:00:00:00:02", "10.0.0.2")
    assert (reply[ARP].hwdst, reply[ARP].pdst) == ("00:00:00:00:00:01", "10.0.0.1")


def test_unknown_target_gratuitous_reply_and_non_arp_are_ignored():
    assert arp_reply(VIEW, request("10.0.0.99")) is None
    assert arp_reply(VIEW, request("10.0.0.1")) is None
    assert arp_reply(VIEW, request("10.0.0.2", op="is-at")) is None
    assert arp_reply(VIEW, bytes(Ether(type=0x0800) / (b"\x00" * 46))) is None
