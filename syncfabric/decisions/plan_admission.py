"""Which datagrams the switches admit toward a plan: only its members reach its UDP ports.

A plan's destinations are its PSs and the aggregators it may use, each on the UDP port
of every PS it serves. Its members are its workers, PSs and those aggregators. On every
switch, a destination is closed to anything that arrives on a port facing no other
switch, except from a member's own port with that member's address. Traffic between
switches is not looked at, so members' datagrams pass wherever their paths go. The
daemons still check the source address, as a second line.

The builders turn a switch's share of this into table 0's flows (openflow/builders.py).
"""

from syncfabric.decisions.gradient_plan import steering_shares


def plan_members(workers, pss, aggregators):
    """The hosts that may send to the plan's ports."""
    return sorted(set(workers) | set(pss) | set(aggregators))


def plan_destinations(view, pss, aggregators, ports):
    """{(dst ip, UDP port)}: every PS on its port, and every aggregator on every PS's port."""
    return frozenset((view.ip(node), ports[ps]) for ps in pss for node in [ps, *aggregators])


def admission(view, members, destinations):
    """{switch: (admits, closed)}: admits {(in port, src ip, dst ip, UDP port)} are the
    members' datagrams from their own ports; closed {(dst ip, UDP port)} is every
    destination, on every switch (hosts of any switch may send to it)."""
    shares = {}
    for switch in view.switches:
        admits = frozenset((port, view.ip(host), dst, udp_port)
                           for host in members if view.attachment(host)[0] == switch
                           for port in [view.attachment(host)[1]]
                           for dst, udp_port in destinations)
        shares[switch] = (admits, destinations)
    return shares


def plan_shares(view, request, result, ports):
    """{switch: SteeringShare} of a plan: its streams' steering (gradient_plan) and its
    admission. `request`: the plan request with its PSs and aggregators filled in."""
    pss, aggregators = request["pss"], request["aggregators"]
    members = plan_members(request["workers"], pss, aggregators)
    return steering_shares(view, result.streams(), ports,
                           admission(view, members,
                                     plan_destinations(view, pss, aggregators, ports)))


def steering_switches(shares):
    """The switches a plan's streams cross (not only its admission)."""
    return sorted(switch for switch, share in shares.items() if share.flows)
