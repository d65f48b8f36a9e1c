"""The installer's sending (openflow/installer.py): a switch that takes bytes, as Ryu's
Datapath does, gets a batch's messages and its barrier as one buffer, in order, each
with the xid the installer waits on."""

import itertools
import threading

from ryu.ofproto import ofproto_parser, ofproto_v1_3
from ryu.ofproto.ofproto_protocol import ProtocolDesc

from syncfabric.openflow import builders as of
from syncfabric.openflow.installer import Installer


class ByteSwitch(ProtocolDesc):
    """A switch connection that, like Ryu's Datapath, is sent serialized bytes."""

    def __init__(self):
        super().__init__(ofproto_v1_3.OFP_VERSION)
        self.id, self.writes = 1, []
        self._xids = itertools.count(1)

    def set_xid(self, message):
        message.set_xid(next(self._xids))

    def send(self, buf):
        self.writes.append(buf)
        return True


def headers(buf):
    """[(message type, xid)] of the OpenFlow messages one after another in buf."""
    found, offset = [], 0
    while offset < len(buf):
        _version, msg_type, length, xid = ofproto_parser.header(buf[offset:])
        found.append((msg_type, xid))
        offset += length
    assert offset == len(buf)
    return found


def test_a_batch_reaches_a_byte_switch_as_one_write_with_its_barrier_last():
    switch = ByteSwitch()
    messages = [of.barrier_request(switch) for _ in range(3)] + [
        switch.ofproto_parser.OFPMeterMod(switch, command=switch.ofproto.OFPMC_DELETE,
                                          meter_id=7)]
    installer = Installer(metrics=None, event_class=threading.Event)
    batch = installer.send({switch: messages})
    assert len(switch.writes) == 1
    sent = headers(switch.writes[0])
    assert [msg_type for msg_type, _xid in sent] == [
        ofproto_v1_3.OFPT_BARRIER_REQUEST] * 3 + [ofproto_v1_3.OFPT_METER_MOD,
                                                   ofproto_v1_3.OFPT_BARRIER_REQUEST]
    assert [xid for _type, xid in sent] == [1, 2, 3, 4, 5]
    assert batch._waiting == {(1, 5)} and not batch._done.is_set()
