"""The emulated switch ports' classes sized to the floors booked on their links as
reservations come and go (mininet_topos/class_sizer.py), from GET /fabric/links."""

import time

from mininet_topos.class_sizer import ClassSizer, resized

PORTS = {("leaf1", 3): "leaf1-eth3", ("spine1", 1): "spine1-eth1"}


def link(src, port, reserved, capacity=20.0):
    return {"src": src, "src_port": port, "dst": "x", "dst_port": 1, "kind": "fabric",
            "capacity_mbps": capacity, "reserved_mbps": reserved, "rate_mbps": None,
            "utilization": None}


class Fabric:
    """GET /fabric/links's list, booked as the test says, and the tc batches run."""

    def __init__(self):
        self.booked = {("leaf1", 3): 0.0, ("spine1", 1): 0.0, ("h1", 1): 0.0}
        self.batches = []

    def links(self):
        return [link(src, port, reserved) for (src, port), reserved in self.booked.items()]

    def run_tc(self, commands):
        self.batches.append(commands)


def test_only_switch_ports_whose_floors_moved_are_resized():
    applied = {"leaf1-eth3": (8800, 11200), "spine1-eth1": (8, 19992)}
    changes = resized([link("leaf1", 3, 8.0), link("spine1", 1, 5.0), link("h1", 1, 5.0)],
                      PORTS, applied)
    assert changes == {"spine1-eth1": (20.0, 5.0)}   # a host's port is not a switch's


def test_floors_are_resized_as_jobs_come_and_go():
    fabric = Fabric()
    sizer = ClassSizer(PORTS, fabric.links, fabric.run_tc)
    assert sizer.size_once() == ["leaf1-eth3", "spine1-eth1"]   # first: every port
    fabric.booked[("leaf1", 3)] = 8.0                             # a job comes
    assert sizer.size_once() == ["leaf1-eth3"]
    assert "classid 5:10 htb rate 8800kbit" in fabric.batches[-1][0]
    assert "classid 5:20 htb rate 11200kbit" in fabric.batches[-1][1]
    assert sizer.size_once() == [] and len(fabric.batches) == 2   # nothing moved: no tc
    fabric.booked[("leaf1", 3)] = 0.0                             # it goes
    assert sizer.size_once() == ["leaf1-eth3"]
    assert "classid 5:10 htb rate 8kbit" in fabric.batches[-1][0]


def test_a_failed_read_is_logged_and_tried_again(caplog):
    fabric, reads = Fabric(), []

    def flaky_links():
        reads.append(1)
        if len(reads) == 1:
            raise ConnectionRefusedError("the controller is restarting")
        return fabric.links()
    sizer = ClassSizer(PORTS, flaky_links, fabric.run_tc, interval_s=0.01).start()
    try:
        for _ in range(500):
            if fabric.batches:
                break
            time.sleep(0.01)
    finally:
        sizer.stop()
    assert fabric.batches and "trying again" in caplog.text
