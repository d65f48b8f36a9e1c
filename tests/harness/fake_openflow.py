"""Fake OpenFlow 1.3 switches for controller tests without Open vSwitch, after faucet's
clib/fakeoftable.py: a table that applies the apps' real messages faithfully and raises
on anything it does not model, a datapath that records what it is sent and answers
barriers (or rejects messages, or stays silent), and walks of packets through a fabric."""

import itertools
from collections import Counter, namedtuple

from ryu.lib import hub
from ryu.ofproto import ofproto_v1_3
from ryu.ofproto.ofproto_protocol import ProtocolDesc

FF_GROUP = ofproto_v1_3.OFPGT_FF


def fake_datapath():
    """Enough of a Ryu Datapath to build messages: its ofproto and parser."""
    return ProtocolDesc(ofproto_v1_3.OFP_VERSION)


class SwitchRefusal(Exception):
    """What a real switch answers with an OpenFlow error (type, code)."""

    def __init__(self, type_, code):
        super().__init__("error type %d code %d" % (type_, code))
        self.type, self.code = type_, code


FakeFlow = namedtuple("FakeFlow", "priority cookie match instructions table_id")


class FakeFlowTable:
    """Flows (of every OpenFlow table), groups and meters of one switch, changed by the
    apps' real messages; packets looked up count on the flows they hit."""

    def __init__(self):
        self.flows = []  # FakeFlow
        self.packets = Counter()   # (table, priority, sorted match) -> packets that hit it
        self.groups = {}  # group id -> (type, [OFPBucket])
        self.meters = {}  # meter id -> (flags, bands)
        self.down_ports = set()   # ports whose link is down: FAST_FAILOVER skips them

    def apply(self, message):
        """Apply a FlowMod, GroupMod or MeterMod as OVS does; SwitchRefusal where OVS
        answers an error; AssertionError for what this fake does not model."""
        ofproto = message.datapath.ofproto
        name = type(message).__name__
        if name == "OFPGroupMod":
            return self._apply_group(ofproto, message)
        if name == "OFPMeterMod":
            return self._apply_meter(ofproto, message)
        assert name == "OFPFlowMod", "the fake table does not model %s" % name
        if message.command == ofproto.OFPFC_ADD:
            self._check_references(ofproto, message.instructions)
            match = dict(message.match.items())
            self.flows = [f for f in self.flows if (f.table_id, f.priority, f.match)
                          != (message.table_id, message.priority, match)]
            self.flows.append(FakeFlow(message.priority, message.cookie, match,
                                       message.instructions, message.table_id))
        elif message.command == ofproto.OFPFC_DELETE:
            assert message.table_id == ofproto.OFPTT_ALL and message.out_port == ofproto.OFPP_ANY \
                and message.out_group == ofproto.OFPG_ANY and not dict(message.match.items()), \
                "the fake table models DELETE by cookie only"
            self.flows = [f for f in self.flows if not self._cookie_hit(f, message)]
        elif message.command == ofproto.OFPFC_DELETE_STRICT:
            match = dict(message.match.items())
            self.flows = [f for f in self.flows if not (
                self._cookie_hit(f, message) and (f.table_id, f.priority, f.match)
                == (message.table_id, message.priority, match))]
        else:
            raise AssertionError("the fake table does not model FlowMod command %r"
                                 % message.command)

    @staticmethod
    def _cookie_hit(flow, message):
        return flow[1] & message.cookie_mask == message.cookie & message.cookie_mask

    def _check_references(self, ofproto, instructions):
        """OVS refuses a flow that names a missing group or meter."""
        for instruction in instructions:
            if hasattr(instruction, "meter_id") and instruction.meter_id not in self.meters:
                raise SwitchRefusal(ofproto.OFPET_METER_MOD_FAILED, ofproto.OFPMMFC_UNKNOWN_METER)
            for action in getattr(instruction, "actions", []):
                if hasattr(action, "group_id") and action.group_id not in self.groups:
                    raise SwitchRefusal(ofproto.OFPET_BAD_ACTION, ofproto.OFPBAC_BAD_OUT_GROUP)

    def _apply_group(self, ofproto, message):
        assert message.type in (ofproto.OFPGT_ALL, ofproto.OFPGT_FF) \
            or message.command == ofproto.OFPGC_DELETE, \
            "the fake table models groups ALL and FAST_FAILOVER only"
        buckets = (message.type, list(message.buckets))
        if message.command == ofproto.OFPGC_ADD:
            if message.group_id in self.groups:
                raise SwitchRefusal(ofproto.OFPET_GROUP_MOD_FAILED, ofproto.OFPGMFC_GROUP_EXISTS)
            self.groups[message.group_id] = buckets
        elif message.command == ofproto.OFPGC_MODIFY:
            if message.group_id not in self.groups:
                raise SwitchRefusal(ofproto.OFPET_GROUP_MOD_FAILED, ofproto.OFPGMFC_UNKNOWN_GROUP)
            self.groups[message.group_id] = buckets
        elif message.command == ofproto.OFPGC_DELETE:
            if message.group_id == ofproto.OFPG_ALL:
                self.groups.clear()
            self.groups.pop(message.group_id, None)
            self._drop_flows_using(lambda a: getattr(a, "group_id", None) not in self.groups)
        else:
            raise AssertionError("the fake table does not model GroupMod command %r"
                                 % message.command)

    def _apply_meter(self, ofproto, message):
        if message.command == ofproto.OFPMC_ADD:
            if message.meter_id in self.meters:
                raise SwitchRefusal(ofproto.OFPET_METER_MOD_FAILED, ofproto.OFPMMFC_METER_EXISTS)
            self.meters[message.meter_id] = (message.flags, message.bands)
        elif message.command == ofproto.OFPMC_MODIFY:
            if message.meter_id not in self.meters:
                raise SwitchRefusal(ofproto.OFPET_METER_MOD_FAILED, ofproto.OFPMMFC_UNKNOWN_METER)
            self.meters[message.meter_id] = (message.flags, message.bands)
        elif message.command == ofproto.OFPMC_DELETE:
            if message.meter_id == ofproto.OFPM_ALL:
                self.meters.clear()
            self.meters.pop(message.meter_id, None)
            self.flows = [f for f in self.flows if all(
                getattr(i, "meter_id", None) in (None, *self.meters) for i in f[3])]
        else:
            raise AssertionError("the fake table does not model MeterMod command %r"
                                 % message.command)

    def _drop_flows_using(self, is_gone):
        """OVS deletes the flows that point to a group deleted under them."""
        self.flows = [f for f in self.flows if not any(
            hasattr(a, "group_id") and is_gone(a) for i in f[3] for a in getattr(i, "actions", []))]

    def state(self):
        """Everything the table holds, comparable across tables."""
        return {"flows": sorted((f.priority, f.cookie, sorted(f.match.items()), f.table_id)
                                for f in self.flows),
                "groups": sorted(self.groups), "meters": sorted(self.meters)}

    def lookup(self, packet, table_id=0):
        """Output ports for the packet: from table 0, the highest-priority matching
        flow's outputs, or those of the table it goes to; following group buckets
        (every meter it names must exist): every bucket of an ALL group, the first live
        one (its watch port up) of a FAST_FAILOVER group, and groups that buckets send
        to. Like OVS, a group may send to one that does not exist (OVS accepts it):
        that bucket sends nothing. No flow matching: dropped, as OVS does."""
        hits = [f for f in self.flows if f.table_id == table_id
                and all(packet.get(k) == v for k, v in f.match.items())]
        if not hits:
            return []
        top = max(hit.priority for hit in hits)
        winners = [hit for hit in hits if hit.priority == top]
        assert len(winners) == 1, "overlapping flows at one priority: %r" % winners
        winner = winners[0]
        self.packets[winner.table_id, winner.priority, tuple(sorted(winner.match.items()))] += 1
        ports = []
        for instruction in winner.instructions:
            if hasattr(instruction, "meter_id"):
                assert instruction.meter_id in self.meters, "missing meter %d" % instruction.meter_id
            elif hasattr(instruction, "table_id"):
                assert instruction.table_id > table_id, "a goto must go forward"
                ports += self.lookup(packet, instruction.table_id)
            else:
                ports += self._outputs(instruction.actions)
        return ports

    def _outputs(self, actions):
        ports = []
        for action in actions:
            if not hasattr(action, "group_id"):
                ports.append(action.port)
                continue
            group_type, buckets = self.groups.get(action.group_id, (None, []))
            if group_type == FF_GROUP:
                buckets = [b for b in buckets if b.watch_port not in self.down_ports][:1]
            for bucket in buckets:
                ports += self._outputs(bucket.actions)
        return ports


FAKE_PACKET_BYTES = 1000   # what every packet looked up counts in bytes


def flow_stats_reply(datapath, request):
    """The flows whose cookie the request selects, in its table or all, and whose match
    has every field of the request's with its value (OpenFlow's non-strict selection),
    with the packets that hit them (FAKE_PACKET_BYTES each)."""
    parser, table = datapath.ofproto_parser, datapath.table
    wanted = dict(request.match.items())
    body = []
    for f in table.flows:
        if f.cookie & request.cookie_mask != request.cookie & request.cookie_mask \
                or request.table_id not in (datapath.ofproto.OFPTT_ALL, f.table_id) \
                or any(f.match.get(k) != v for k, v in wanted.items()):
            continue
        packets = table.packets[f.table_id, f.priority, tuple(sorted(f.match.items()))]
        body.append(parser.OFPFlowStats(
            table_id=f.table_id, duration_sec=0, duration_nsec=0, priority=f.priority,
            idle_timeout=0, hard_timeout=0, flags=0, cookie=f.cookie,
            byte_count=packets * FAKE_PACKET_BYTES, match=parser.OFPMatch(**f.match),
            packet_count=packets, instructions=f.instructions))
    return parser.OFPFlowStatsReply(datapath, flags=0, body=body)


def meter_stats_reply(datapath, _request):
    """Every meter, with the packets of the flows that name it as its input (its band
    drops none: the fake does not police)."""
    parser, table = datapath.ofproto_parser, datapath.table
    packets = Counter()
    for f in table.flows:
        for instruction in f.instructions:
            if hasattr(instruction, "meter_id"):
                packets[instruction.meter_id] += table.packets[
                    f.table_id, f.priority, tuple(sorted(f.match.items()))]
    return parser.OFPMeterStatsReply(datapath, flags=0, body=[
        parser.OFPMeterStats(meter_id=meter_id, flow_count=0,
                             packet_in_count=packets[meter_id],
                             byte_in_count=packets[meter_id] * FAKE_PACKET_BYTES,
                             duration_sec=0, duration_nsec=0,
                             band_stats=[parser.OFPMeterBandStats(0, 0)])
        for meter_id in sorted(table.meters)])


def group_desc_reply(datapath, _request):
    parser = datapath.ofproto_parser
    return parser.OFPGroupDescStatsReply(datapath, flags=0, body=[
        parser.OFPGroupDescStats(type_=group_type, group_id=group_id, buckets=buckets)
        for group_id, (group_type, buckets) in sorted(datapath.table.groups.items())])


def meter_config_reply(datapath, _request):
    parser = datapath.ofproto_parser
    return parser.OFPMeterConfigStatsReply(datapath, flags=0, body=[
        parser.OFPMeterConfigStats(flags=flags, meter_id=meter_id, bands=bands)
        for meter_id, (flags, bands) in sorted(datapath.table.meters.items())])


CONTENTS_REPLIES = {"OFPFlowStatsRequest": flow_stats_reply,
                    "OFPGroupDescStatsRequest": group_desc_reply,
                    "OFPMeterConfigStatsRequest": meter_config_reply,
                    "OFPMeterStatsRequest": meter_stats_reply}


class FakeDatapath(ProtocolDesc):
    """A connected switch: applies what it is sent to its table and answers through
    `network` (barrier replies, errors) as a real switch answers over its connection.
    `reject(message)` -> True makes it refuse a message; `silent` leaves barriers
    unanswered."""

    def __init__(self, dpid, network):
        super().__init__(ofproto_v1_3.OFP_VERSION)
        self.id, self.network = dpid, network
        self.table = FakeFlowTable()
        self.sent = []
        self.reject = lambda message: False
        self.silent = False
        self._xids = itertools.count(1)

    def set_xid(self, message):
        message.set_xid(next(self._xids))
        return message.xid

    def send_msg(self, message):
        if message.xid is None:
            self.set_xid(message)
        self.sent.append(message)
        self.network.sent.append((self.id, message))
        name = type(message).__name__
        if name == "OFPBarrierRequest":
            if not self.silent:
                self.network.answer(self, self.ofproto_parser.OFPBarrierReply(self), message.xid)
        elif name in CONTENTS_REPLIES:
            self.network.answer(self, CONTENTS_REPLIES[name](self, message), message.xid)
        elif name in ("OFPPortStatsRequest", "OFPPacketOut"):
            pass   # what a real switch answers here, the tests do not need
        else:
            try:
                if self.reject(message):
                    raise SwitchRefusal(self.ofproto.OFPET_BAD_REQUEST, self.ofproto.OFPBRC_EPERM)
                self.table.apply(message)
            except SwitchRefusal as refusal:
                error = self.ofproto_parser.OFPErrorMsg(self, type_=refusal.type, code=refusal.code)
                self.network.answer(self, error, message.xid)


class FakeNetwork:
    """Carries the fake switches' answers to the installer in a separate greenlet, in
    order, as Ryu's connection threads do: whoever waits for a confirmation yields, and
    other requests run meanwhile. before_answer(datapath, message) runs just before each
    answer is delivered (e.g. to start a concurrent request)."""

    def __init__(self, installer, on_reply=None):
        self.installer = installer
        self.on_reply = on_reply   # on_reply(message): a multipart reply, to the apps
        self.before_answer = None
        self.sent = []   # (dpid, message) in the order every switch was sent them
        self._answers = hub.Queue()
        self._thread = hub.spawn(self._deliver)

    def answer(self, datapath, message, xid):
        message.xid = xid
        self._answers.put((datapath, message))

    def _deliver(self):
        while True:
            datapath, message = self._answers.get()
            if self.before_answer is not None:
                self.before_answer(datapath, message)
            name = type(message).__name__
            if name == "OFPBarrierReply":
                self.installer.barrier_reply(message)
            elif name == "OFPErrorMsg":
                self.installer.error(message)
            else:
                self.on_reply(message)

    def quiet(self):
        """True if every answer sent so far was delivered."""
        return self._answers.empty()

    def close(self):
        hub.kill(self._thread)


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
    groups (copies sent to a port in its table's down_ports are lost); fails on a loop
    or a copy delivered twice."""
    delivered, frontier, visits = [], [view.attachment(src_host)], 0
    while frontier:
        node, in_port = frontier.pop()
        visits += 1
        assert visits <= view.graph.number_of_nodes(), "the packet loops"
        for out_port in tables[node].lookup(dict(packet, in_port=in_port)):
            if out_port in tables[node].down_ports:
                continue   # its link is down: the copy is lost
            (neighbour,) = [n for n in view.graph.successors(node) if view.out_port(node, n) == out_port]
            if view.is_host(neighbour):
                delivered.append(neighbour)
            else:
                frontier.append((neighbour, view.out_port(neighbour, node)))
    assert len(delivered) == len(set(delivered)), "duplicate copies: %r" % delivered
    return set(delivered)
