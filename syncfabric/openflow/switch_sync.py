"""Where a connecting switch is reconciled without a gap: what it holds, read back as
flow stats, group descriptions and meter configs, is compared with what the controller
wants there (the fabric's flows and every live tree's and plan's share, as the ADD
messages that would install them), and only the difference is sent. Groups and
meters that differ are modified in place, so the flows that use them keep
forwarding; flows that differ are overwritten by an ADD with their match, table 1's
before table 0's; what the controller does not want (flows of our cookies, every
group and meter: we own them all on fabric switches) is deleted last. A switch that
kept what is wanted gets nothing (tests/unit/test_hitless_restart.py).
"""

from dataclasses import dataclass, field

from syncfabric.openflow import builders as of

FLOW_COMMANDS = ("add", "modify", "modify", "delete", "delete")   # by OFPFC_ value
GROUP_AND_METER_COMMANDS = ("add", "modify", "delete")            # by OFPGC_ / OFPMC_ value


@dataclass
class Contents:
    """A switch's flows {(table, priority, match): (cookie, instructions)}, groups {id: (type,
    buckets)} and meters {id: (flags, bands)}, in comparable form."""
    flows: dict = field(default_factory=dict)
    groups: dict = field(default_factory=dict)
    meters: dict = field(default_factory=dict)


def match_key(match):
    return tuple(sorted(match.items()))


def actions_key(actions):
    return tuple((type(a).__name__, getattr(a, "port", None), getattr(a, "max_len", None),
                  getattr(a, "group_id", None)) for a in actions)


def instruction_key(instruction):
    if hasattr(instruction, "meter_id"):
        return ("meter", instruction.meter_id)
    if hasattr(instruction, "table_id"):
        return ("goto", instruction.table_id)
    return ("actions", instruction.type, actions_key(instruction.actions))


def instructions_key(instructions):
    return tuple(sorted(instruction_key(i) for i in instructions))


def buckets_key(buckets):
    return tuple((bucket.watch_port, bucket.watch_group, actions_key(bucket.actions))
                 for bucket in buckets)


def chains(description):
    """True if a group's buckets send to other groups, which must exist first."""
    _type, buckets = description
    return any(action[0] == "OFPActionGroup" for _watch_port, _watch_group, actions in buckets
               for action in actions)


def bands_key(bands):
    return tuple((type(b).__name__, b.rate, b.burst_size) for b in bands)


def wanted_contents(messages):
    """Contents of a switch after these ADD messages, and {key: message} to send them."""
    contents, senders = Contents(), {}
    for message in messages:
        name = type(message).__name__
        if name == "OFPFlowMod":
            key = ("flow", message.table_id, message.priority, match_key(message.match))
            contents.flows[key[1:]] = (message.cookie, instructions_key(message.instructions))
        elif name == "OFPGroupMod":
            key = ("group", message.group_id)
            contents.groups[key[1]] = (message.type, buckets_key(message.buckets))
        elif name == "OFPMeterMod":
            key = ("meter", message.meter_id)
            contents.meters[key[1]] = (message.flags, bands_key(message.bands))
        else:
            raise ValueError("not an installing message: %s" % name)
        senders[key] = message
    return contents, senders


def held_contents(flow_stats, group_descs, meter_configs):
    """Contents of a switch from its replies (the bodies' entries)."""
    return Contents(
        {(s.table_id, s.priority, match_key(s.match)): (s.cookie, instructions_key(s.instructions))
         for s in flow_stats},
        {d.group_id: (d.type, buckets_key(d.buckets)) for d in group_descs},
        {c.meter_id: (c.flags, bands_key(c.bands)) for c in meter_configs})


def difference(datapath, wanted_messages, held):
    """The messages that turn `held` into what wanted_messages install, in an order
    that never leaves a flow without its group or meter: meters and groups added or
    modified in place (groups that others send to first), flows added or overwritten
    (forwarding before admission), then the flows, groups (those sending to others
    first) and meters nobody wants deleted."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    wanted, senders = wanted_contents(wanted_messages)
    messages = []
    for meter_id, config in sorted(wanted.meters.items()):
        if meter_id not in held.meters:
            messages.append(senders["meter", meter_id])
        elif held.meters[meter_id] != config:
            mod = senders["meter", meter_id]
            messages.append(parser.OFPMeterMod(datapath, command=ofproto.OFPMC_MODIFY,
                                               flags=mod.flags, meter_id=meter_id, bands=mod.bands))
    for group_id, description in sorted(wanted.groups.items(),
                                        key=lambda item: (chains(item[1]), item[0])):
        if group_id not in held.groups:
            messages.append(senders["group", group_id])
        elif held.groups[group_id] != description:
            mod = senders["group", group_id]
            messages.append(parser.OFPGroupMod(datapath, command=ofproto.OFPGC_MODIFY,
                                               type_=mod.type, group_id=group_id,
                                               buckets=mod.buckets))
    messages += [senders[("flow", *key)] for key, flow in sorted(wanted.flows.items(),
                                                                 key=forwarding_first)
                 if held.flows.get(key) != flow]
    messages += [of.flow_removal(datapath, cookie, priority, dict(match), table)
                 for (table, priority, match), (cookie, _instructions)
                 in sorted(held.flows.items(), key=str)
                 if (table, priority, match) not in wanted.flows]
    messages += [parser.OFPGroupMod(datapath, command=ofproto.OFPGC_DELETE, group_id=group_id)
                 for group_id in sorted(set(held.groups) - set(wanted.groups),
                                        key=lambda group_id: (not chains(held.groups[group_id]),
                                                              group_id))]
    messages += [parser.OFPMeterMod(datapath, command=ofproto.OFPMC_DELETE, meter_id=meter_id)
                 for meter_id in sorted(set(held.meters) - set(wanted.meters))]
    return messages


def forwarding_first(item):
    """Flows to add in an order that never admits a packet to a table that cannot take
    it yet: the later tables first (table 1's forwarding before table 0's admission,
    whose flows go to table 1), then by key."""
    (table, *_rest), _flow = item
    return (-table, str(item))


def summary(messages):
    """What a difference does, in words: e.g. "meter modify 1, flow add 2"."""
    counts = {}
    for message in messages:
        kind = type(message).__name__[3:-3].lower()   # OFPFlowMod -> flow
        commands = FLOW_COMMANDS if kind == "flow" else GROUP_AND_METER_COMMANDS
        counts[kind, commands[message.command]] = counts.get((kind, commands[message.command]), 0) + 1
    return ", ".join("%s %s %d" % (kind, command, n) for (kind, command), n in sorted(counts.items()))


REPLY_KINDS = ("flows", "groups", "meters")


class Readings:
    """The switches being read, by dpid: a reading starts with its requests (each given
    its xid), takes the replies to them only, and ends when the switch is reconciled or
    gone."""

    def __init__(self):
        self._by_dpid = {}

    def start(self, datapath, sent_mark):
        """The requests that read the switch; `sent_mark`: the installer's count of
        messages sent to it so far."""
        requests = of.contents_requests(datapath)
        self._by_dpid[datapath.id] = Reading(sent_mark, map(datapath.set_xid, requests))
        return requests

    def part(self, dpid, kind, entries, more, xid):
        """A reply (part) to the switch's reading; True once all of it is in."""
        reading = self._by_dpid.get(dpid)
        if reading is None or not reading.answered_by(xid):
            return False
        return reading.add(kind, entries, more)

    def end(self, dpid):
        """The switch's reading, no longer waited for (None if it had none)."""
        return self._by_dpid.pop(dpid, None)


class Reading:
    """A switch being read: the replies' entries so far, and how many messages the
    installer had sent it when the requests went out (if that changed by the end, what
    was read may be stale). `xids`: its requests' (other flow stats, such as the
    admission drop counts, are not part of it)."""

    def __init__(self, sent_mark, xids):
        self.sent_mark, self.xids = sent_mark, frozenset(xids)
        self.entries = {kind: [] for kind in REPLY_KINDS}
        self.complete = set()

    def answered_by(self, xid):
        return xid in self.xids

    def add(self, kind, entries, more):
        """A reply (part): kind in REPLY_KINDS; True once every reply is complete."""
        self.entries[kind] += entries
        if not more:
            self.complete.add(kind)
        return len(self.complete) == len(REPLY_KINDS)

    def held(self):
        """What the switch holds (Contents), once complete."""
        return held_contents(*(self.entries[kind] for kind in REPLY_KINDS))

