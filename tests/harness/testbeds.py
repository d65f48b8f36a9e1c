"""What integration tests need around a real testbed: root, the testbed itself, what is
left on the machine (bridges, controllers) after it, and its controller's metrics."""

import pytest


def require_root():
    import os
    if os.geteuid() != 0:
        pytest.skip("integration tests need root (Mininet); run `make test` as root")


def running_testbed(topo, of_port, rest_port, data_plane=None):
    """A module fixture's body: the testbed on `topo` (skipped without root; data_plane:
    mininet_topos/data_plane.DataPlane, default its default), and afterwards the check
    that the controller logged no traceback."""
    from experiments.testbed import FabricTestbed
    from mininet_topos.data_plane import DataPlane
    require_root()
    with FabricTestbed(topo, of_port=of_port, rest_port=rest_port,
                       data_plane=data_plane or DataPlane()) as testbed:
        yield testbed
        log = testbed.controller_log()
    assert "Traceback" not in log


def bridges():
    import subprocess
    return set(subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True,
                              check=True).stdout.split())


def controllers_on_port(of_port):
    import subprocess
    listing = subprocess.run(["pgrep", "-af", "ryu-manager"], capture_output=True, text=True).stdout
    return [line for line in listing.splitlines() if "--ofp-tcp-listen-port %d " % of_port in line]


def scrape(bed, families=None):
    """{(sample name, sorted labels): value} of the testbed controller's GET /metrics;
    `families` (a set) gets the family names."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families
    with urllib.request.urlopen(bed.client.base_url + "/metrics", timeout=10) as answer:
        text = answer.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        if families is not None and not family.name.endswith("_created"):
            families.add(family.name)   # _created: when a counter or histogram series began
        samples.update({(sample.name, tuple(sorted(sample.labels.items()))): sample.value
                        for sample in family.samples})
    return samples
