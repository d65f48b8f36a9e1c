"""OpenFlow 1.3 messages for the fabric: decisions in, messages out.

Every function takes the datapath (for its ofproto and parser) and returns
message objects without sending them, so the app stays a thin sender and the
messages can be inspected in tests. Each app owns a cookie, so one app can
replace its own flows without touching another's.

Every switch has two tables. Table 0 admits: what arrives on a host-facing port
for a plan's UDP port is passed on only from that plan's members (their port and
address), and dropped otherwise; everything else passes. Table 1 forwards: routes,
trees and steering. This module holds what every app shares (cookies, tables,
priorities, flows, meters) and the fabric's own routes; a tree's messages are in
tree_messages.py, a gradient plan's steering and admission in steering_messages.py.
"""

import functools

from syncfabric.traffic_classes import BORROWED_DSCP

FABRIC_COOKIE = 0x5346_0000_0000_0001
MULTICAST_COOKIE_BASE = 0x5346_0002_0000_0000  # | tree id
APP_COOKIE_MASK = 0xFFFF_FFFF_0000_0000    # the bits shared by every cookie of one app
STEERING_COOKIE_BASE = 0x5346_0003_0000_0000  # | plan id
# | on a plan's not-member drops, so that counting them asks the switches for those
# flows only: the members' (hundreds a switch) cost the controller 30 us each to parse
NOT_MEMBER_COOKIE_BIT = 0x8000_0000
ALL_COOKIE_BITS = 0xFFFF_FFFF_FFFF_FFFF
OUR_COOKIES, OUR_COOKIES_MASK = 0x5346_0000_0000_0000, 0xFFFF_0000_0000_0000   # every app's
STEERING_METER_BASE = 0x0010_0000            # + plan id * METERS_PER_PLAN + leg index
METERS_PER_PLAN = 0x1000

TABLE_ADMISSION = 0
TABLE_FORWARDING = 1

PRIORITY_FROM_SWITCH = 30   # table 0: what another switch sends is never looked at
PRIORITY_MEMBER = 20        # table 0: a member's datagrams to its plan's UDP ports
PRIORITY_NOT_MEMBER = 10    # table 0: anything else to those ports is dropped
PRIORITY_PASS = 0           # table 0: everything else goes on to forwarding

PRIORITY_MULTICAST = 400
PRIORITY_STEERING = 350
IP_PROTO_UDP = 17
PRIORITY_ARP = 300
PRIORITY_PAIR_ROUTE = 200
PRIORITY_DST_ROUTE = 100

ETH_TYPE_IPV4 = 0x0800
ETH_TYPE_ARP = 0x0806


STEERING_MATCHES_KEPT = 8192   # matches built once and shared (shared_match)
METER_BURST_S = 0.1  # explicit: OVS turns burst 0 into a whole second of traffic
MIN_BURST_KBITS = 300  # four jumbo frames: a bucket smaller than one frame passes none


def flow_add(datapath, cookie, priority, match, actions, meter_id=None):
    """A forwarding flow (table 1)."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    instructions = [parser.OFPInstructionActions(ofproto.OFPIT_APPLY_ACTIONS, actions)]
    if meter_id is not None:
        instructions.insert(0, parser.OFPInstructionMeter(meter_id))
    return parser.OFPFlowMod(datapath=datapath, cookie=cookie, table_id=TABLE_FORWARDING,
                             priority=priority, match=match, instructions=instructions,
                             command=ofproto.OFPFC_ADD)


def metered_flows(datapath, cookie, priority, match_fields, actions, meter_id):
    """A forwarding flow held to its rate by meter_id, and, if it has a meter, its
    borrowed twin: the same match in the borrowed class (one priority higher, DSCP
    BORROWED_DSCP) with the same actions and no meter. Borrowed datagrams are what a
    job sends beyond its floor; the switch's queues serve them only from what
    guaranteed traffic leaves (syncfabric/traffic_classes.py)."""
    parser = datapath.ofproto_parser
    flows = [flow_add(datapath, cookie, priority, shared_match(parser, match_fields), actions,
                      meter_id=meter_id)]
    if meter_id is not None:
        flows.append(flow_add(datapath, cookie, priority + 1,
                              shared_match(parser, borrowed_fields(match_fields)), actions))
    return flows


def borrowed_fields(match_fields):
    """A match's sorted (name, value) pairs, narrowed to the borrowed class."""
    return tuple(sorted(dict(match_fields, ip_dscp=BORROWED_DSCP).items()))


def metered_flow_removals(datapath, cookie, priority, match_fields):
    """Delete a flow of metered_flows and its borrowed twin (a twin absent is no error)."""
    return [flow_removal(datapath, cookie, priority, dict(match_fields)),
            flow_removal(datapath, cookie, priority + 1, dict(borrowed_fields(match_fields)))]


def admission_flow(datapath, cookie, priority, match_fields, admit):
    """An admission flow (table 0): `admit` passes what it matches on to forwarding,
    else it is dropped (and counted in the flow's packet count)."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    instructions = [parser.OFPInstructionGotoTable(TABLE_FORWARDING)] if admit else []
    return parser.OFPFlowMod(datapath=datapath, cookie=cookie, table_id=TABLE_ADMISSION,
                             priority=priority,
                             match=shared_match(parser, tuple(sorted(match_fields.items()))),
                             instructions=instructions, command=ofproto.OFPFC_ADD)


@functools.lru_cache(maxsize=STEERING_MATCHES_KEPT)
def shared_match(parser, fields):
    """The match of `fields` (sorted (name, value) pairs), built once for every switch,
    plan and message that has it (serializing a match leaves it as it is). A job's plan
    needs hundreds (a stream's on every switch of its path, its members' and closed
    destinations' on every switch), most of them new: Ryu takes 32-80 us to build one
    from keywords (AMD EPYC, Intel Xeon), most of it normalizing each field's value,
    which match_field does once per value."""
    ordered = sorted(match_field(parser, name, value) for name, value in fields)
    return parser.OFPMatch(_ordered_fields=[field for _oxm_type, field in ordered])


@functools.lru_cache(maxsize=STEERING_MATCHES_KEPT)
def match_field(parser, name, value):
    """(OXM type, the field as OFPMatch holds it): what OFPMatch(**{name: value}) does to
    one field, Ryu's own steps, so that a match of such fields in OXM type order is the
    one OFPMatch builds from keywords."""
    ofproto = parser.ofproto
    oxm_type, oxm_value, mask = ofproto.oxm_from_user(*ofproto.oxm_normalize_user(name, value))
    order = oxm_type[0] if isinstance(oxm_type, tuple) else oxm_type
    return order, ofproto.oxm_to_user(oxm_type, oxm_value, mask)


def admission_passes(datapath, fabric_ports):
    """Table 0's flows of the fabric: what arrives from another switch, and what no
    plan's admission concerns, goes on to forwarding."""
    return ([admission_flow(datapath, FABRIC_COOKIE, PRIORITY_FROM_SWITCH, {"in_port": port},
                            admit=True) for port in fabric_ports]
            + [admission_flow(datapath, FABRIC_COOKIE, PRIORITY_PASS, {}, admit=True)])


def admission_drop_requests(datapath):
    """Ask a switch for table 0's not-member flows of every plan (NOT_MEMBER_COOKIE_BIT),
    whose drops the metrics count."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return parser.OFPFlowStatsRequest(datapath, 0, TABLE_ADMISSION, ofproto.OFPP_ANY,
                                      ofproto.OFPG_ANY,
                                      STEERING_COOKIE_BASE | NOT_MEMBER_COOKIE_BIT,
                                      APP_COOKIE_MASK | NOT_MEMBER_COOKIE_BIT, parser.OFPMatch())


def class_counter_requests(datapath):
    """Ask a switch for its meters' counts (every meter is a job's or a tree's floor: the
    guaranteed class where its streams enter) and for its borrowed twins' (the flows
    that match the borrowed class's DSCP)."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    borrowed = parser.OFPMatch(eth_type=ETH_TYPE_IPV4, ip_dscp=BORROWED_DSCP)
    return [parser.OFPMeterStatsRequest(datapath, 0, ofproto.OFPM_ALL),
            parser.OFPFlowStatsRequest(datapath, 0, TABLE_FORWARDING, ofproto.OFPP_ANY,
                                       ofproto.OFPG_ANY, 0, 0, borrowed)]


def delete_flows(datapath, cookie):
    """Delete every flow carrying `cookie`, in all tables."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return parser.OFPFlowMod(datapath=datapath, cookie=cookie, cookie_mask=ALL_COOKIE_BITS,
                             table_id=ofproto.OFPTT_ALL, command=ofproto.OFPFC_DELETE,
                             out_port=ofproto.OFPP_ANY, out_group=ofproto.OFPG_ANY)


def flow_removal(datapath, cookie, priority, match_fields, table_id=TABLE_FORWARDING):
    """Delete the one flow with this cookie, priority and exact match."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return parser.OFPFlowMod(datapath=datapath, cookie=cookie, cookie_mask=ALL_COOKIE_BITS,
                             table_id=table_id, priority=priority,
                             match=parser.OFPMatch(**match_fields),
                             command=ofproto.OFPFC_DELETE_STRICT, out_port=ofproto.OFPP_ANY,
                             out_group=ofproto.OFPG_ANY)


def arp_to_controller(datapath, in_port):
    """ARP arriving from a host port goes to the controller, which answers it: no flooding."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    match = parser.OFPMatch(in_port=in_port, eth_type=ETH_TYPE_ARP)
    actions = [parser.OFPActionOutput(ofproto.OFPP_CONTROLLER, ofproto.OFPCML_NO_BUFFER)]
    return flow_add(datapath, FABRIC_COOKIE, PRIORITY_ARP, match, actions)


def route_match_fields(dst_ip, src_ip=None):
    fields = {"eth_type": ETH_TYPE_IPV4, "ipv4_dst": dst_ip}
    if src_ip is not None:
        fields["ipv4_src"] = src_ip
    return fields


def route_flow(datapath, rule):
    """The flow for one unicast_routes.ForwardingRule (source+destination rules above
    destination-only ones)."""
    parser = datapath.ofproto_parser
    priority = PRIORITY_DST_ROUTE if rule.src_ip is None else PRIORITY_PAIR_ROUTE
    return flow_add(datapath, FABRIC_COOKIE, priority,
                    parser.OFPMatch(**route_match_fields(rule.dst_ip, rule.src_ip)),
                    [parser.OFPActionOutput(rule.out_port)])


def fabric_flow_adds(datapath, host_ports, rules, fabric_ports=()):
    """The fabric's flows of one switch: admission's passes, ARP trapping on host
    ports, and the routes."""
    return (admission_passes(datapath, fabric_ports)
            + [arp_to_controller(datapath, port) for port in host_ports]
            + [route_flow(datapath, rule) for rule in rules])


def route_changes(datapath, old_rules, new_rules):
    """The messages that take one switch from routes `old_rules` to `new_rules` without a
    gap: changed and new routes added (an ADD replaces the flow with its match), then
    the routes no longer wanted removed."""
    def by_match(rules):
        return {(rule.dst_ip, rule.src_ip): rule for rule in rules}
    old, new = by_match(old_rules), by_match(new_rules)
    adds = [route_flow(datapath, rule) for key, rule in sorted(new.items(), key=str)
            if old.get(key) != rule]
    removals = [flow_removal(datapath, FABRIC_COOKIE, PRIORITY_DST_ROUTE if src is None else
                             PRIORITY_PAIR_ROUTE, route_match_fields(dst, src))
                for dst, src in sorted(set(old) - set(new), key=str)]
    return adds + removals


def contents_requests(datapath):
    """Ask a switch what it holds: the flows of our cookies, every group and every meter."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return [parser.OFPFlowStatsRequest(datapath, 0, ofproto.OFPTT_ALL, ofproto.OFPP_ANY,
                                       ofproto.OFPG_ANY, OUR_COOKIES, OUR_COOKIES_MASK,
                                       parser.OFPMatch()),
            parser.OFPGroupDescStatsRequest(datapath, 0),
            parser.OFPMeterConfigStatsRequest(datapath, 0, ofproto.OFPM_ALL)]


def multicast_cookie(tree_id):
    return MULTICAST_COOKIE_BASE | tree_id


def meter_rate_kbps(rate_mbps):
    """The rate a meter for rate_mbps enforces, in the kbit/s OpenFlow counts."""
    return max(1, int(round(rate_mbps * 1000)))


def meter_add(datapath, meter_id, rate_mbps, command=None):
    """A meter that drops what exceeds rate_mbps (with an explicit burst); command
    OFPMC_MODIFY changes an existing meter's rate in place."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    rate_kbps = meter_rate_kbps(rate_mbps)
    band = parser.OFPMeterBandDrop(rate=rate_kbps, burst_size=max(MIN_BURST_KBITS,
                                                                  int(rate_kbps * METER_BURST_S)))
    return parser.OFPMeterMod(datapath, command=ofproto.OFPMC_ADD if command is None else command,
                              flags=ofproto.OFPMF_KBPS | ofproto.OFPMF_BURST,
                              meter_id=meter_id, bands=[band])


def packet_out(datapath, out_port, data):
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return parser.OFPPacketOut(datapath=datapath, buffer_id=ofproto.OFP_NO_BUFFER,
                               in_port=ofproto.OFPP_CONTROLLER,
                               actions=[parser.OFPActionOutput(out_port)], data=data)


def port_stats_request(datapath):
    return datapath.ofproto_parser.OFPPortStatsRequest(datapath, 0, datapath.ofproto.OFPP_ANY)


def barrier_request(datapath):
    return datapath.ofproto_parser.OFPBarrierRequest(datapath)
