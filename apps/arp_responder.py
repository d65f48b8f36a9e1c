"""Proxy ARP from the fabric description: the controller answers every ARP
request for a known host itself, so ARP never floods a multipath fabric."""

from ryu.lib.packet import arp, ethernet, packet
from ryu.ofproto import ether


def arp_reply(view, frame):
    """The Ethernet frame answering ARP request `frame`, or None if it is not one we answer."""
    request = packet.Packet(frame).get_protocol(arp.arp)
    if request is None or request.opcode != arp.ARP_REQUEST or request.src_ip == request.dst_ip:
        return None
    target = view.host_by_ip.get(request.dst_ip)
    if target is None:
        return None
    target_mac = view.mac(target)
    reply = packet.Packet()
    reply.add_protocol(ethernet.ethernet(dst=request.src_mac, src=target_mac,
                                         ethertype=ether.ETH_TYPE_ARP))
    reply.add_protocol(arp.arp(opcode=arp.ARP_REPLY, src_mac=target_mac, src_ip=request.dst_ip,
                               dst_mac=request.src_mac, dst_ip=request.src_ip))
    reply.serialize()
    return bytes(reply.data)
