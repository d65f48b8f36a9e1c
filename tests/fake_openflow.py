"""A fake OpenFlow 1.3 switch that applies the apps' real FlowMod messages (as in faucet's tests)
and walks packets through a whole fabric by following output ports."""

from ryu.ofproto import ofproto_v1_3
from ryu.ofproto.ofproto_protocol import ProtocolDesc


def fake_datapath():
    """Enough of a Ryu Datapath to build messages: its ofproto and parser."""
    return ProtocolDesc(ofproto_v1_3.OFP_VERSION)


class FakeFlowTable:
    def __init__(self):
        self.flows = []  # (priority, cookie, match dict, actions)

    def apply(self, message):
        ofproto = message.datapath.ofproto
        if message.command == ofproto.OFPFC_ADD:
            match = dict(message.match.items())
            self.flows = [f for f in self.flows if (f[0], f[2]) != (message.priority, match)]
            self.flows.append((message.priority, message.cookie, match,
                               message.instructions[0].actions))
        elif message.command == ofproto.OFPFC_DELETE:
            self.flows = [f for f in self.flows
                          if f[1] & message.cookie_mask != message.cookie & message.cookie_mask]
        else:
            raise AssertionError("unexpected FlowMod command %r" % message.command)

    def lookup(self, packet):
        """Actions of the highest-priority flow whose every match field equals the packet's."""
        hits = [f for f in self.flows if all(packet.get(k) == v for k, v in f[2].items())]
        if not hits:
            return []
        top = max(hit[0] for hit in hits)
        winners = [hit for hit in hits if hit[0] == top]
        assert len(winners) == 1, "overlapping flows at one priority: %r" % winners
        return winners[0][3]


def walk(view, tables, src_host, packet, max_hops=16):
    """Follow `packet` from src_host through the fake tables; return the nodes it visits."""
    node, in_port = view.attachment(src_host)
    visited = [src_host]
    for _hop in range(max_hops):
        visited.append(node)
        actions = tables[node].lookup(dict(packet, in_port=in_port))
        assert len(actions) == 1, "%s: expected one output, got %r" % (node, actions)
        out_port = actions[0].port
        (neighbour,) = [n for n in view.graph.successors(node) if view.out_port(node, n) == out_port]
        if view.is_host(neighbour):
            visited.append(neighbour)
            return visited
        in_port = view.out_port(neighbour, node)
        node = neighbour
    raise AssertionError("packet looped: %r" % visited)
