"""OpenFlow 1.3 messages for a gradient plan's share of one switch (gradient_plan.
SteeringShare): each stream's flow on the switches of its path, its meter on the first,
and the plan's admission in table 0 (its members' datagrams admitted, everything else
to its destinations dropped). A share moves make-before-break (steering_changes): the
new flows and meters first, members admitted before anything is closed to others; what
only the old share had goes once every switch confirmed."""

import functools

from syncfabric.openflow.builders import (ETH_TYPE_IPV4, IP_PROTO_UDP, METERS_PER_PLAN,
                                          NOT_MEMBER_COOKIE_BIT, PRIORITY_MEMBER,
                                          PRIORITY_NOT_MEMBER,
                                          PRIORITY_STEERING, STEERING_COOKIE_BASE,
                                          STEERING_METER_BASE, TABLE_ADMISSION,
                                          admission_flow, delete_flows, flow_removal, meter_add,
                                          metered_flow_removals, metered_flows)


def member_match(admit):
    """Table 0's match of a member's datagrams: (in port, src ip, dst ip, UDP port)."""
    in_port, src_ip, dst_ip, udp_port = admit
    return {"in_port": in_port, "eth_type": ETH_TYPE_IPV4, "ip_proto": IP_PROTO_UDP,
            "ipv4_src": src_ip, "ipv4_dst": dst_ip, "udp_dst": udp_port}


def closed_match(destination):
    """Table 0's match of everything to a plan's destination: (dst ip, UDP port)."""
    dst_ip, udp_port = destination
    return {"eth_type": ETH_TYPE_IPV4, "ip_proto": IP_PROTO_UDP, "ipv4_dst": dst_ip,
            "udp_dst": udp_port}


def admission_changes(datapath, plan_id, old, new):
    """(make, then_break) of a plan's admission on one switch, from share `old` to
    share `new` (gradient_plan.SteeringShare): members are admitted before anything is
    closed to others, and closed destinations open before their members' flows go."""
    cookie, closed_cookie = steering_cookie(plan_id), not_member_cookie(plan_id)
    make = [admission_flow(datapath, cookie, PRIORITY_MEMBER, member_match(admit), admit=True)
            for admit in sorted(new.admits - old.admits)]
    make += [admission_flow(datapath, closed_cookie, PRIORITY_NOT_MEMBER,
                            closed_match(destination), admit=False)
             for destination in sorted(new.closed - old.closed)]
    then_break = [flow_removal(datapath, closed_cookie, PRIORITY_NOT_MEMBER,
                               closed_match(destination), TABLE_ADMISSION)
                  for destination in sorted(old.closed - new.closed)]
    then_break += [flow_removal(datapath, cookie, PRIORITY_MEMBER, member_match(admit),
                                TABLE_ADMISSION) for admit in sorted(old.admits - new.admits)]
    return make, then_break


def steering_cookie(plan_id):
    return STEERING_COOKIE_BASE | plan_id


def not_member_cookie(plan_id):
    """The cookie of a plan's not-member drops in table 0 (builders.NOT_MEMBER_COOKIE_BIT)."""
    return steering_cookie(plan_id) | NOT_MEMBER_COOKIE_BIT


def steering_meter_id(plan_id, leg_index):
    """Meter ids of steering legs live above the tree ids (which name tree meters)."""
    if leg_index >= METERS_PER_PLAN:
        raise ValueError("a plan has at most %d legs" % METERS_PER_PLAN)
    return STEERING_METER_BASE + plan_id * METERS_PER_PLAN + leg_index


def steering_flows(datapath, plan_id, key, out_port, meter_id=None):
    """UDP from key's source to its destination on its port leaves by out_port (held
    to a stream's rate by meter_id on the stream's first switch, where its borrowed
    twin has no meter: builders.metered_flows)."""
    parser = datapath.ofproto_parser
    return metered_flows(datapath, steering_cookie(plan_id), PRIORITY_STEERING,
                         steering_fields(key), [parser.OFPActionOutput(out_port)], meter_id)


def steering_fields(key):
    """A stream's match fields, (src ip, dst ip, UDP port), as sorted (name, value) pairs."""
    src_ip, dst_ip, udp_port = key
    return tuple(sorted({"eth_type": ETH_TYPE_IPV4, "ip_proto": IP_PROTO_UDP,
                         "ipv4_src": src_ip, "ipv4_dst": dst_ip, "udp_dst": udp_port}.items()))


def steering_changes(datapath, plan_id, old, new):
    """(make, then_break): the messages that take one switch from share `old` of a plan
    (gradient_plan.SteeringShare) to share `new` without a gap; a stream's meter is
    named by the plan and the stream's index. make adds the new meters, sets the new rates of kept
    ones and adds or overwrites flows (an ADD with a flow's match and priority replaces
    it in place); then_break, once every switch confirmed make, deletes the flows and
    meters only `old` had. From NO_SHARE, make installs a share. The share's admission
    (admission_changes) is made after its flows, and broken first."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    meter_id = functools.partial(steering_meter_id, plan_id)
    make = [meter_add(datapath, meter_id(stream), rate) for stream, rate in new.meters.items()
            if stream not in old.meters]
    make += [meter_add(datapath, meter_id(stream), rate, ofproto.OFPMC_MODIFY)
             for stream, rate in new.meters.items()
             if stream in old.meters and old.meters[stream] != rate]
    for key, (out_port, stream) in new.flows.items():
        if old.flows.get(key) != (out_port, stream):
            make += steering_flows(datapath, plan_id, key, out_port,
                                   None if stream is None else meter_id(stream))
    then_break = []
    for key, (_out_port, stream) in old.flows.items():
        if key not in new.flows:
            then_break += metered_flow_removals(datapath, steering_cookie(plan_id),
                                                PRIORITY_STEERING, steering_fields(key))
        elif stream is not None and new.flows[key][1] is None:   # its twin only
            then_break += metered_flow_removals(datapath, steering_cookie(plan_id),
                                                PRIORITY_STEERING, steering_fields(key))[1:]
    then_break += [parser.OFPMeterMod(datapath, command=ofproto.OFPMC_DELETE,
                                      meter_id=meter_id(stream))
                   for stream in old.meters if stream not in new.meters]
    admission_make, admission_break = admission_changes(datapath, plan_id, old, new)
    return make + admission_make, admission_break + then_break


def steering_removal(datapath, plan_id, streams):
    """Remove a plan's flows (its not-member drops too) from one switch, then the meters
    of its streams there."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    return [delete_flows(datapath, steering_cookie(plan_id)),
            delete_flows(datapath, not_member_cookie(plan_id))] + [
        parser.OFPMeterMod(datapath, command=ofproto.OFPMC_DELETE,
                           meter_id=steering_meter_id(plan_id, stream))
        for stream in streams]
