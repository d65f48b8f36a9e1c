"""A fake OpenFlow 1.3 switch that applies the apps' real FlowMod messages (as in faucet's tests)
and walks packets through a whole fabric by following output ports."""

from ryu.ofproto import ofproto_v1_3
from ryu.ofproto.ofproto_protocol import ProtocolDesc


def fake_datapath():
    """Enough of a Ryu Datapath to build messages: its ofproto and parser."""
    return ProtocolDesc(ofproto_v1_3.OFP_VERSION)


class FakeFlowTable:
    """Flows, groups and meters of one switch, changed by the apps' real messages."""

    def __init__(self):
        self.flows = []  # (priority, cookie, match dict, instructions)
        self.groups = {}  # group id -> (type, [bucket actions])
        self.meters = {}  # meter id -> (flags, bands)

    def apply(self, message):
        ofproto = message.datapath.ofproto
        name = type(message).__name__
        if name == "OFPGroupMod":
            return self._apply_group(ofproto, message)
        if name == "OFPMeterMod":
            return self._apply_meter(ofproto, message)
        if message.command == ofproto.OFPFC_ADD:
            match = dict(message.match.items())
            self.flows = [f for f in self.flows if (f[0], f[2]) != (message.priority, match)]
            self.flows.append((message.priority, message.cookie, match, message.instructions))
        elif message.command == ofproto.OFPFC_DELETE:
            self.flows = [f for f in self.flows
                          if f[1] & message.cookie_mask != message.cookie & message.cookie_mask]
        else:
            raise AssertionError("unexpected FlowMod command %r" % message.command)

    def _apply_group(self, ofproto, message):
        if message.command == ofproto.OFPGC_ADD:
            assert message.group_id not in self.groups, "group %d exists" % message.group_id
            self.groups[message.group_id] = (message.type, [b.actions for b in message.buckets])
        elif message.command == ofproto.OFPGC_DELETE:
            self.groups.pop(message.group_id, None)

    def _apply_meter(self, ofproto, message):
        if message.command == ofproto.OFPMC_ADD:
            assert message.meter_id not in self.meters, "meter %d exists" % message.meter_id
            self.meters[message.meter_id] = (message.flags, message.bands)
        elif message.command == ofproto.OFPMC_DELETE:
            self.meters.pop(message.meter_id, None)

    def lookup(self, packet):
        """Output ports for the packet: the highest-priority matching flow's outputs,
        following group buckets (every meter it names must exist)."""
        hits = [f for f in self.flows if all(packet.get(k) == v for k, v in f[2].items())]
        if not hits:
            return []
        top = max(hit[0] for hit in hits)
        winners = [hit for hit in hits if hit[0] == top]
        assert len(winners) == 1, "overlapping flows at one priority: %r" % winners
        ports = []
        for instruction in winners[0][3]:
            if hasattr(instruction, "meter_id"):
                assert instruction.meter_id in self.meters, "missing meter %d" % instruction.meter_id
                continue
            for action in instruction.actions:
                if hasattr(action, "group_id"):
                    group_type, buckets = self.groups[action.group_id]
                    ports += [a.port for bucket in buckets for a in bucket]
                else:
                    ports.append(action.port)
        return ports


def walk(view, tables, src_host, packet, max_hops=16):
    """Follow `packet` from src_host through the fake tables; return the nodes it visits."""
    node, in_port = view.attachment(src_host)
    visited = [src_host]
    for _hop in range(max_hops):
        visited.append(node)
        ports = tables[node].lookup(dict(packet, in_port=in_port))
        assert len(ports) == 1, "%s: expected one output, got %r" % (node, ports)
        out_port = ports[0]
        (neighbour,) = [n for n in view.graph.successors(node) if view.out_port(node, n) == out_port]
        if view.is_host(neighbour):
            visited.append(neighbour)
            return visited
        in_port = view.out_port(neighbour, node)
        node = neighbour
    raise AssertionError("packet looped: %r" % visited)


def multicast_walk(view, tables, src_host, packet):
    """Hosts a multicast packet from src_host reaches, each exactly once, following
    groups; fails on a loop or a copy delivered twice."""
    delivered, frontier, visits = [], [view.attachment(src_host)], 0
    while frontier:
        node, in_port = frontier.pop()
        visits += 1
        assert visits <= view.graph.number_of_nodes(), "the packet loops"
        for out_port in tables[node].lookup(dict(packet, in_port=in_port)):
            (neighbour,) = [n for n in view.graph.successors(node) if view.out_port(node, n) == out_port]
            if view.is_host(neighbour):
                delivered.append(neighbour)
            else:
                frontier.append((neighbour, view.out_port(neighbour, node)))
    assert len(delivered) == len(set(delivered)), "duplicate copies: %r" % delivered
    return set(delivered)
