import json
import subprocess
import sys
from pathlib import Path

import pytest

from mininet_topos.description import describe
from mininet_topos.spineleaf import SpineLeafTopo, host_ip, host_mac


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


def test_host_addresses_go_past_one_byte():
    assert host_ip(300) == "10.0.1.44"
    assert host_mac(300) == "00:00:00:00:01:2c"


@pytest.mark.parametrize("kwargs", [
    {"spines": 0}, {"leaves": -1}, {"hosts_per_leaf": 0}, {"spines": 2.5},
    {"spines": 5000}, {"bw": 0}, {"bw": -3}, {"host_bw": 0}, {"spines": True},
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
                            check=True, cwd=Path(__file__).resolve().parent.parent).stdout
    assert output.split() == ["16", "16", "80"]
