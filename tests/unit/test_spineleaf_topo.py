import json
import subprocess
import sys
from pathlib import Path

import pytest

from mininet_topos.description import describe
from mininet_topos.grid_example import GridExampleTopo
from mininet_topos.spineleaf import SpineLeafTopo, host_ip, host_mac
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.multicast_trees import is_spine_leaf


def test_names_dpids_ports_macs_and_ips_are_deterministic():
    topo = SpineLeafTopo(spines=3, leaves=2, hosts_per_leaf=2, bw=20, host_bw=40)
    description = describe(topo)
    assert description == describe(SpineLeafTopo(spines=3, leaves=2, hosts_per_leaf=2, bw=20,
                                                 host_bw=40))
    dpids = {s["name"]: s["dpid"] for s in description["switches"]}
    assert dpids == {"spine1": 0x1001, "spine2": 0x1002, "spine3": 0x1003,
                     "leaf1": 0x2001, "leaf2": 0x2002}
    assert {"a": "leaf2", "a_port": 3, "b": "spine3", "b_port": 2, "capacity_mbps": 20} \
        in description["links"]
    assert len(description["links"]) == 6
    h3 = next(h for h in description["hosts"] if h["name"] == "h3")
    assert h3 == {"name": "h3", "ip": "10.0.0.3", "mac": "00:00:00:00:00:03",
                  "switch": "leaf2", "port": 4, "capacity_mbps": 40}


def test_each_leaf_spine_link_can_have_its_own_rate():
    description = describe(SpineLeafTopo(spines=2, leaves=2, hosts_per_leaf=1,
                                         bw=[10, 12.5, 14, 30], host_bw=20))
    rates = {(link["a"], link["b"]): link["capacity_mbps"] for link in description["links"]}
    assert rates == {("leaf1", "spine1"): 10, ("leaf1", "spine2"): 12.5,
                     ("leaf2", "spine1"): 14, ("leaf2", "spine2"): 30}
    assert {h["capacity_mbps"] for h in description["hosts"]} == {20}
    with pytest.raises(ValueError, match="one rate per leaf-spine link"):
        SpineLeafTopo(spines=2, leaves=2, bw=[10, 20, 30])


def test_host_addresses_go_past_one_byte():
    assert host_ip(300) == "10.0.1.44"
    assert host_mac(300) == "00:00:00:00:01:2c"


@pytest.mark.parametrize("kwargs", [
    {"spines": 0}, {"leaves": -1}, {"hosts_per_leaf": 0}, {"spines": 2.5},
    {"spines": 5000}, {"bw": 0}, {"bw": -3}, {"host_bw": 0}, {"spines": True},
    {"bw": [20, 20, 0, 20]},
])
def test_bad_sizes_and_rates_are_refused(kwargs):
    with pytest.raises(ValueError):
        SpineLeafTopo(**kwargs)


def test_description_command_prints_json():
    output = subprocess.run([sys.executable, "-m", "mininet_topos.spineleaf", "2", "3", "1"],
                            capture_output=True, text=True, check=True).stdout
    description = json.loads(output)
    assert len(description["switches"]) == 5 and len(description["hosts"]) == 3


def test_description_command_rejects_bad_sizes_in_one_line():
    answer = subprocess.run([sys.executable, "-m", "mininet_topos.spineleaf", "0", "3", "1"],
                            capture_output=True, text=True)
    assert answer.returncode != 0
    assert answer.stderr.strip().splitlines() == ["error: spines must be an integer between 1 and 4095, got 0"]


def test_topology_file_loads_alone_as_mn_custom_does():
    """`mn --custom` execs the file with Debian's python3, outside our package and venv."""
    script = ("namespace = {}\n"
              "exec(open('mininet_topos/spineleaf.py').read(), namespace)\n"
              "topo = namespace['topos']['spineleaf'](8, 8, 2)\n"
              "print(len(topo.switches()), len(topo.hosts()), len(topo.links()))\n")
    output = subprocess.run(["/usr/bin/python3", "-c", script], capture_output=True, text=True,
                            check=True, cwd=Path(__file__).resolve().parents[2]).stdout
    assert output.split() == ["16", "16", "80"]


def test_aggregator_hosts_hang_off_the_programmable_switches():
    view = FabricView(describe(SpineLeafTopo(spines=2, leaves=3, hosts_per_leaf=2, bw=20,
                                             aggregators="all", aggregator_bw=9)))
    assert view.aggregators == {"agg-spine1": 9.0, "agg-spine2": 9.0, "agg-leaf1": 9.0,
                                "agg-leaf2": 9.0, "agg-leaf3": 9.0}
    assert view.attachment("agg-leaf2") == ("leaf2", 5) and view.attachment("agg-spine1") == ("spine1", 4)
    assert view.graph.edges["spine1", "agg-spine1"]["capacity_mbps"] == 9   # shaped to C_s
    assert view.ip("agg-spine1") == "10.0.0.7"   # numbered after the 6 workers
    assert is_spine_leaf(view)                  # aggregators on spines keep the fabric spine-leaf
    for aggregators, expected in (("leaves", {"agg-leaf1", "agg-leaf2", "agg-leaf3"}),
                                  ("spines", {"agg-spine1", "agg-spine2"}),
                                  ("leaf3+spine1", {"agg-spine1", "agg-leaf3"}),
                                  (["leaf1"], {"agg-leaf1"}), (None, set())):
        topo = SpineLeafTopo(spines=2, leaves=3, hosts_per_leaf=2, aggregators=aggregators)
        assert set(FabricView(describe(topo)).aggregators) == expected
    with pytest.raises(ValueError, match="no switch named leaf9"):
        SpineLeafTopo(aggregators="leaf9")


def test_grid_example_triangle_is_the_papers():
    view = FabricView(describe(GridExampleTopo()))
    assert sorted(view.switches) == ["s1", "s2", "s3"]
    assert {view.attachment(h)[0] for h in ("w1", "w2", "w3", "w4")} == {"s1"}
    assert {view.attachment(h)[0] for h in ("w5", "w6")} == {"s2"}
    assert {view.attachment(h)[0] for h in ("w7", "w8", "ps")} == {"s3"}
    assert view.aggregators == {"agg-s1": 9.0, "agg-s2": 9.0, "agg-s3": 9.0}
    assert all(view.graph.edges[a, b]["capacity_mbps"] == 3
               for a, b in (("s1", "s3"), ("s1", "s2"), ("s2", "s3")))
    assert view.graph.edges["s3", "ps"]["capacity_mbps"] == 9


@pytest.mark.parametrize("custom, topo", [("mininet_topos/grid_example.py", "gridexample"),
                                          ("mininet_topos/spineleaf.py", "spineleaf")])
def test_topologies_load_as_mn_custom_files(custom, topo):
    # `mn --custom` execs the file alone, without __file__ and from any folder
    path = Path(__file__).resolve().parents[2] / custom
    code = ("customs = {}; exec(compile(open(%r).read(), %r, 'exec'), customs, customs); "
            "print(sorted(customs['topos'][%r]().hosts()))" % (str(path), str(path), topo))
    answer = subprocess.run(["/usr/bin/python3", "-c", code], capture_output=True, text=True,
                            cwd="/", check=True)
    assert "h1" in answer.stdout or "w1" in answer.stdout
