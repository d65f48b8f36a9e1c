"""The fabrics every experiment can build (mininet_topos/registry.py), named as Mininet's
--topo names them, a user's own included, and the experiments' --topo flag."""

import argparse

import pytest

from experiments.allreduce import parse_args as allreduce_arguments
from experiments.cli import build_fabric, fabric_host_count
from mininet_topos.registry import TopoSpec, build_topo, fabric_hosts, parse_topo

USER_FABRIC = '''
from mininet.topo import Topo


def two_racks(hosts=2, bw=10):
    topo = Topo()
    for rack in (1, 2):
        topo.addSwitch("r%d" % rack, dpid="%016x" % rack)
        for k in range(hosts):
            name = "h%d" % ((rack - 1) * hosts + k + 1)
            topo.addHost(name)
            topo.addLink(name, "r%d" % rack, bw=bw)
    topo.addLink("r1", "r2", bw=bw)
    return topo
'''


def test_mininet_s_syntax_names_a_fabric_and_its_arguments():
    assert parse_topo("fattree,4") == TopoSpec("fattree", (4,), {})
    assert parse_topo("spineleaf,spines=4,leaves=2") == TopoSpec(
        "spineleaf", (), {"spines": 4, "leaves": 2})
    assert str(parse_topo("fattree,k=4")) == "fattree,k=4"
    assert len(fabric_hosts(build_topo(parse_topo("fattree,4"), bw=20))) == 16
    assert len(fabric_hosts(build_topo(parse_topo("spineleaf,2,3,2"), bw=20))) == 6


def test_an_unknown_fabric_names_those_there_are():
    with pytest.raises(ValueError, match="no fabric named 'ring': give one of fattree, "
                                         "grid_example, inart_example, spineleaf"):
        parse_topo("ring,4")
    with pytest.raises(ValueError, match="cannot load the fabric nowhere.at_all:f"):
        parse_topo("nowhere.at_all:f,3")


def test_a_user_s_own_factory_is_built_with_the_rate_it_takes(tmp_path, monkeypatch):
    (tmp_path / "my_fabrics.py").write_text(USER_FABRIC)
    monkeypatch.syspath_prepend(str(tmp_path))
    topo = build_topo(parse_topo("my_fabrics:two_racks,3"), bw=7, aggregators="top")
    assert fabric_hosts(topo) == ["h1", "h2", "h3", "h4", "h5", "h6"]
    assert {topo.linkInfo(a, b)["bw"] for a, b in topo.links()} == {7}


def test_the_top_tier_gets_the_aggregators_on_any_fabric():
    def aggregators(text):
        topo = build_topo(parse_topo(text), bw=20, aggregators="top", aggregator_bw=9)
        return sorted(h for h in topo.hosts() if topo.nodeInfo(h).get("role") == "aggregator")
    assert aggregators("spineleaf,spines=2,leaves=2") == ["agg-spine1", "agg-spine2"]
    assert aggregators("fattree,4") == ["agg-c1", "agg-c2", "agg-c3", "agg-c4"]


def test_what_the_topo_text_sets_wins_and_a_worked_example_keeps_its_rates():
    topo = build_topo(parse_topo("spineleaf,spines=1,leaves=2,bw=5"), bw=20)
    assert {topo.linkInfo(a, b)["bw"] for a, b in topo.links()} == {5}
    example = build_topo(parse_topo("grid_example"), bw=20)   # its build takes no bw
    assert 20 not in {example.linkInfo(a, b)["bw"] for a, b in example.links()}
    with pytest.raises(ValueError, match="--topo fattree,4,oops=1"):
        build_topo(parse_topo("fattree,4,oops=1"), bw=20)


def test_an_experiment_takes_topo_in_place_of_the_spine_leaf_flags(capsys):
    args = allreduce_arguments(["--topo", "fattree,4", "--workers", "8", "--bw", "20"])
    assert str(args.topo) == "fattree,4" and fabric_host_count(args) == 16
    with pytest.raises(SystemExit):
        allreduce_arguments(["--topo", "fattree,4", "--workers", "17", "--bw", "20"])
    assert "every --workers count must be between 2 and 16" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        allreduce_arguments(["--topo", "torus,3", "--bw", "20"])
    assert "no fabric named 'torus'" in capsys.readouterr().err


def test_a_fabric_whose_rate_is_not_known_yet_is_built_at_its_own_default():
    """--bw auto before calibration: counting hosts builds the fabric at the rate its
    factory defaults to (SpineLeafTopo's 20 Mbit/s), not at a made-up one."""
    args = argparse.Namespace(topo=parse_topo("spineleaf,spines=2,leaves=2,hosts_per_leaf=3"),
                              bw="auto")
    assert fabric_host_count(args) == 6
    topo = build_fabric(args)
    assert {topo.linkInfo(*link)["bw"] for link in topo.links()} == {20}
    assert {build_fabric(args, bw=7).linkInfo(*link)["bw"] for link in topo.links()} == {7}
