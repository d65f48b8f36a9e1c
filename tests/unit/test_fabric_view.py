import copy

import pytest

from mininet_topos.description import describe
from mininet_topos.spineleaf import SpineLeafTopo
from syncfabric.decisions.fabric_view import FabricError, FabricView

DESCRIPTION = describe(SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=1, bw=20))


def test_view_has_both_directions_of_every_cable():
    view = FabricView(DESCRIPTION)
    assert view.switches == ["spine1", "spine2", "leaf1", "leaf2"]
    assert view.hosts == ["h1", "h2"]
    assert view.graph.number_of_edges() == 2 * (4 + 2)
    assert view.out_port("leaf2", "spine1") == 1 and view.out_port("spine1", "leaf2") == 2
    assert view.attachment("h2") == ("leaf2", 3)
    assert view.host_ports("leaf1") == [3]
    assert view.host_by_ip["10.0.0.2"] == "h2"
    assert view.switch_by_dpid[0x2001] == "leaf1"


def test_description_round_trips():
    assert FabricView(DESCRIPTION).to_description() == {
        "switches": sorted(DESCRIPTION["switches"], key=lambda s: s["dpid"]),
        "links": sorted(DESCRIPTION["links"], key=lambda l: (l["a"], l["b"])),
        "hosts": DESCRIPTION["hosts"]}


def broken(change):
    description = copy.deepcopy(DESCRIPTION)
    change(description)
    return description


@pytest.mark.parametrize("description, message", [
    ([], "must be a JSON object"),
    ({"switches": []}, "needs a 'links' list"),
    (broken(lambda d: d["switches"][0].pop("dpid")), "missing 'dpid'"),
    (broken(lambda d: d["switches"][1].update(dpid=d["switches"][0]["dpid"])), "duplicate dpid"),
    (broken(lambda d: d["switches"][0].update(dpid=0)), "dpid must be"),
    (broken(lambda d: d["links"][0].update(b="nowhere")), "unknown switch 'nowhere'"),
    (broken(lambda d: d["links"][0].update(a_port=0)), "port number in 1.."),
    (broken(lambda d: d["links"][0].update(a_port=2 ** 32)), "port number in 1.."),
    (broken(lambda d: d["hosts"][0].update(aggregation_mbps=-1)), "aggregation_mbps must be"),
    (broken(lambda d: d["hosts"][0].update(mac="00:00:00:00:00:01\n")), "not a MAC"),
    (broken(lambda d: d["links"][0].update(capacity_mbps=-1)), "capacity_mbps must be positive"),
    (broken(lambda d: d["links"][0].update(capacity_mbps="fast")), "'capacity_mbps' must be"),
    (broken(lambda d: d["links"][1].update(a_port=d["links"][0]["a_port"])), "used twice"),
    (broken(lambda d: d["hosts"][0].update(ip="10.0.0.300")), "not an IPv4 address"),
    (broken(lambda d: d["hosts"][0].update(mac="zz")), "not a MAC address"),
    (broken(lambda d: d["hosts"][1].update(ip=d["hosts"][0]["ip"])), "duplicate IP"),
    (broken(lambda d: d["hosts"][0].update(name="leaf1")), "duplicate node name"),
    (broken(lambda d: d.update(links=[])), "not connected"),
    (broken(lambda d: d["hosts"][0].update(role="gpu")), "'role' must be one of"),
    (broken(lambda d: d["hosts"][0].update(role="aggregator", aggregation_mbps=0)),
     "aggregation_mbps must be positive"),
])
def test_bad_descriptions_say_why(description, message):
    with pytest.raises(FabricError, match=message):
        FabricView(description)


def test_aggregators_are_hosts_with_a_role_and_a_capacity():
    description = broken(lambda d: d["hosts"][0].update(role="aggregator", aggregation_mbps=7.5))
    view = FabricView(description)
    name = description["hosts"][0]["name"]
    assert view.aggregators == {name: 7.5} and view.is_aggregator(name) and view.is_host(name)
    assert FabricView(view.to_description()).aggregators == {name: 7.5}
    default = broken(lambda d: d["hosts"][0].update(role="aggregator"))
    assert FabricView(default).aggregators == {name: default["hosts"][0]["capacity_mbps"]}


def test_routes_are_kept_for_a_bounded_number_of_failure_sets():
    from syncfabric.decisions.unicast_routes import RoutesAround
    from syncfabric.services.fabric_links import ROUTE_SETS_KEPT
    from tests.harness.fake_controller import description
    routes = RoutesAround(FabricView(description(spines=4, leaves=4)), ROUTE_SETS_KEPT)
    leaves = ["leaf%d" % i for i in range(1, 5)]
    spines = ["spine%d" % i for i in range(1, 5)]
    for leaf in leaves:
        for spine in spines:
            routes(frozenset({frozenset((leaf, spine))}))
    assert len(routes.cache) == ROUTE_SETS_KEPT + 1 and frozenset() in routes.cache
    assert frozenset({frozenset(("leaf4", "spine4"))}) in routes.cache   # the latest is kept
