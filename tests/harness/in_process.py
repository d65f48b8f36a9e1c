"""What the in-process controller tests share: requests, what they list, and what the
fake switches deliver and hold."""

from ryu.lib import hub

from syncfabric.openflow import builders as of
from tests.harness.fake_openflow import multicast_walk, walk

TREE = {"source": "h1", "receivers": ["h2", "h3", "h4"], "bandwidth_mbps": 5}


def empty(controller):
    """No tree or plan state on any switch, nothing booked."""
    return (all(s == {"flows": [], "groups": [], "meters": []} for s in controller.state().values())
            and dict(controller.services.fabric.book.reserved_mbps) == {})


def delivered(controller, tree):
    packet = {"eth_type": of.ETH_TYPE_IPV4, "ipv4_src": controller.view.ip(tree["source"]),
              "ipv4_dst": tree["address"]}
    return multicast_walk(controller.view, controller.tables(), tree["source"], packet)


def post(controller, path, body, **headers):
    return controller.request("POST", path, body, headers=headers)


def release_key(answer):
    return {"X-Release-Key": answer["release_key"]}


def listed(controller):
    """Every tree, round and plan the REST API reports."""
    return {"trees": controller.request("GET", "/multicast/trees")[1]["trees"],
            "rounds": controller.request("GET", "/selmcast/rounds")[1]["rounds"],
            "plans": controller.request("GET", "/ina/plans")[1]["plans"]}


NOTHING_LISTED = {"trees": [], "rounds": [], "plans": []}


def concurrently(controller, calls):
    """Run REST calls at the same moment; their statuses, sorted."""
    threads = [hub.spawn(controller.request, *call) for call in calls]
    return sorted(thread.wait()[0] for thread in threads)


def move_make_before_break(controller):
    _, tree = post(controller, "/multicast/trees", TREE)
    assert tree["backup_uplinks"] == []
    spine = next(child for parent, child in tree["edges"] if parent == "leaf1")
    other = ({"spine1", "spine2"} - {spine}).pop()
    sent_before = len(controller.network.sent)
    controller.port_down("leaf1", spine)
    _, now = controller.request("GET", "/multicast/trees/%d" % tree["id"])
    assert (now["id"], now["address"], now["bandwidth_mbps"]) == (
        tree["id"], tree["address"], tree["bandwidth_mbps"])
    assert ["leaf1", other] in now["edges"] and ["leaf1", spine] not in now["edges"]
    assert delivered(controller, now) == {"h2", "h3", "h4"}
    state = controller.state()
    assert state[spine]["groups"] == [] and state[other]["groups"] == [tree["id"]]
    # make before break: the old spine loses the tree only after leaf1's group points to
    # the new spine and the new spine confirmed its share
    ofproto = controller.switches["leaf1"].ofproto
    groups = [(controller.view.switch_by_dpid[dpid], m.command)
              for dpid, m in controller.network.sent[sent_before:]
              if type(m).__name__ == "OFPGroupMod" and m.group_id == tree["id"]]
    assert groups.index((spine, ofproto.OFPGC_DELETE)) > max(
        groups.index(("leaf1", ofproto.OFPGC_MODIFY)), groups.index((other, ofproto.OFPGC_ADD)))
    barriers = [i for i, (dpid, m) in enumerate(controller.network.sent[sent_before:])
                if type(m).__name__ == "OFPBarrierRequest"
                and controller.view.switch_by_dpid[dpid] == other]
    deletes = [i for i, (dpid, m) in enumerate(controller.network.sent[sent_before:])
               if controller.view.switch_by_dpid[dpid] == spine and type(m).__name__ == "OFPGroupMod"]
    assert barriers and deletes and barriers[0] < deletes[0]


PLAN = {"job": "j", "workers": ["h1", "h2", "h3"], "ps": "h4", "gradient_mb": 1}


def steered_to(controller, plan):
    """{(source, destination): the hosts a packet of each stream visits}."""
    visits = {}
    for worker, legs in plan["workers"].items():
        for leg in legs:
            visits[worker, leg["node"]] = walk_stream(controller, plan, worker, leg["node"], leg["ps"])
    for aggregate in plan["aggregates"]:
        visits[aggregate["aggregator"], aggregate["ps"]] = walk_stream(
            controller, plan, aggregate["aggregator"], aggregate["ps"], aggregate["ps"])
    return visits


def walk_stream(controller, plan, source, destination, ps):
    view = controller.view
    packet = {"eth_type": of.ETH_TYPE_IPV4, "ip_proto": of.IP_PROTO_UDP,
              "ipv4_src": view.ip(source), "ipv4_dst": view.ip(destination),
              "udp_dst": plan["ports"][ps]}
    return walk(view, controller.tables(), source, packet)


def stream_paths(plan):
    return ({(w, leg["node"]): leg["path"] for w, legs in plan["workers"].items() for leg in legs}
            | {(a["aggregator"], a["ps"]): a["path"] for a in plan["aggregates"]})


def again_loads(controller, plan):
    """{link or aggregator: Mbit/s} the plan's streams put on it."""
    loads = {}
    streams = ([(leg["node"], leg["path"], leg["rate_mbps"]) for legs in plan["workers"].values()
                for leg in legs]
               + [(a["ps"], a["path"], a["rate_mbps"]) for a in plan["aggregates"]])
    for node, path, rate in streams:
        resources = list(zip(path, path[1:])) + ([node] if node in plan["aggregators"] else [])
        for resource in resources:
            loads[resource] = loads.get(resource, 0.0) + rate
    return loads


ROUND = {"job": "r", "workers": ["h1", "h2", "h3", "h4"], "update_mb": 0.2, "p": 1}


def changes_sent(controller, switch, since):
    """The flow, group and meter mods sent to `switch` since network.sent[since]."""
    dpid = controller.view.dpid(switch)
    return [m for d, m in controller.network.sent[since:] if d == dpid
            and type(m).__name__ in ("OFPFlowMod", "OFPGroupMod", "OFPMeterMod")]
