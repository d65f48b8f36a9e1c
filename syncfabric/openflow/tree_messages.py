"""OpenFlow 1.3 messages for a multicast tree's share of one switch: its ingress meter,
one FAST_FAILOVER group per protected uplink, the ALL group that replicates, and the
flows that send the tree's packets there. A tree moves make-before-break: what a new
share needs is made first, what only the old one had is removed once every switch
confirmed (tree_changes)."""

from syncfabric.openflow.builders import (ETH_TYPE_IPV4, PRIORITY_MULTICAST, delete_flows,
                                          meter_add, metered_flow_removals, metered_flows,
                                          multicast_cookie)

FAILOVER_GROUP_BASE = 0x4000_0000   # + tree id * FAILOVER_GROUPS_PER_TREE + uplink index
FAILOVER_GROUPS_PER_TREE = 0x100


def failover_group_id(tree_id, index):
    """The FAST_FAILOVER group of a tree's index-th protected uplink (above the tree ids,
    which name the trees' ALL groups)."""
    if index >= FAILOVER_GROUPS_PER_TREE:
        raise ValueError("a tree has at most %d protected uplinks" % FAILOVER_GROUPS_PER_TREE)
    return FAILOVER_GROUP_BASE + tree_id * FAILOVER_GROUPS_PER_TREE + index


def tree_match(in_port, address):
    return {"in_port": in_port, "eth_type": ETH_TYPE_IPV4, "ipv4_dst": address}


def tree_changes(datapath, tree_id, address, old, new):
    """(make, then_break): the messages that take one switch from share `old` of a tree
    to share `new` (multicast_trees.TreeShare; None: no share) without a gap. make adds,
    or modifies in place, the ingress meter, one FAST_FAILOVER group per protected
    uplink (its port while it is live, else its backup), the ALL group that replicates
    (through those groups) and the flows of new in_ports; then_break, sent once every
    switch confirmed make, removes what only `old` had. The tree id names the meter
    and the ALL group."""
    if new is None:
        return [], tree_removal(datapath, tree_id, old)
    old_failover = dict(enumerate(old.failover)) if old else {}
    new_failover = dict(enumerate(new.failover))
    old_police = old.police_mbps if old else None
    old_in_ports = old.in_ports if old else ()
    make = []
    if new.police_mbps is not None and new.police_mbps != old_police:
        command = None if old_police is None else datapath.ofproto.OFPMC_MODIFY
        make.append(meter_add(datapath, tree_id, new.police_mbps, command))
    make += failover_groups(datapath, tree_id, old_failover, new_failover)
    if old is None or (old.out_ports, old.failover) != (new.out_ports, new.failover):
        make.append(replication_group(datapath, tree_id, new.out_ports, new_failover,
                                      modify=old is not None))
    meter_id = None if new.police_mbps is None else tree_id
    for in_port in new.in_ports:
        if in_port not in old_in_ports:
            make += tree_flows(datapath, tree_id, address, in_port, meter_id)
    then_break = []
    for in_port in old_in_ports:
        if in_port not in new.in_ports:
            then_break += metered_flow_removals(datapath, multicast_cookie(tree_id),
                                                PRIORITY_MULTICAST, tree_match(in_port, address))
    then_break += [group_delete(datapath, failover_group_id(tree_id, index))
                   for index in old_failover if index not in new_failover]
    if old_police is not None and new.police_mbps is None:
        then_break.append(meter_delete(datapath, tree_id))
    return make, then_break


def tree_removal(datapath, tree_id, old):
    """Everything of a tree on a switch that held share `old`: its flows, its ALL and
    FAST_FAILOVER groups, and its meter."""
    removal = [delete_flows(datapath, multicast_cookie(tree_id)), group_delete(datapath, tree_id)]
    removal += [group_delete(datapath, failover_group_id(tree_id, index))
                for index in range(len(old.failover))]
    if old.police_mbps is not None:
        removal.append(meter_delete(datapath, tree_id))
    return removal


def failover_groups(datapath, tree_id, old_failover, new_failover):
    """The FAST_FAILOVER groups of the new share that are new or changed ({index: (port,
    backup port)}): each sends to its first live port."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    messages = []
    for index, ports in new_failover.items():
        if old_failover.get(index) == ports:
            continue
        buckets = [parser.OFPBucket(watch_port=port, actions=[parser.OFPActionOutput(port)])
                   for port in ports]
        command = ofproto.OFPGC_MODIFY if index in old_failover else ofproto.OFPGC_ADD
        messages.append(parser.OFPGroupMod(datapath, command=command, type_=ofproto.OFPGT_FF,
                                           group_id=failover_group_id(tree_id, index),
                                           buckets=buckets))
    return messages


def replication_group(datapath, tree_id, out_ports, failover, modify):
    """The tree's ALL group: a copy to every out port, through the port's FAST_FAILOVER
    group where the port is a protected uplink."""
    parser, ofproto = datapath.ofproto_parser, datapath.ofproto
    protected = {primary: index for index, (primary, _backup) in failover.items()}
    buckets = []
    for port in out_ports:
        if port in protected:
            action = parser.OFPActionGroup(failover_group_id(tree_id, protected[port]))
        else:
            action = parser.OFPActionOutput(port)
        buckets.append(parser.OFPBucket(actions=[action]))
    command = ofproto.OFPGC_MODIFY if modify else ofproto.OFPGC_ADD
    return parser.OFPGroupMod(datapath, command=command, type_=ofproto.OFPGT_ALL,
                              group_id=tree_id, buckets=buckets)


def tree_flows(datapath, tree_id, address, in_port, meter_id):
    """The flow that sends the tree's packets arriving on in_port to its ALL group, and
    where it is metered, its borrowed twin (builders.metered_flows)."""
    parser = datapath.ofproto_parser
    return metered_flows(datapath, multicast_cookie(tree_id), PRIORITY_MULTICAST,
                         tuple(sorted(tree_match(in_port, address).items())),
                         [parser.OFPActionGroup(tree_id)], meter_id)


def group_delete(datapath, group_id):
    return datapath.ofproto_parser.OFPGroupMod(datapath, command=datapath.ofproto.OFPGC_DELETE,
                                               group_id=group_id)


def meter_delete(datapath, meter_id):
    return datapath.ofproto_parser.OFPMeterMod(datapath, command=datapath.ofproto.OFPMC_DELETE,
                                               meter_id=meter_id)
