"""The fabric service's switch connections (services/switch_connections.py): a
reconnection replaces the old datapath, whose late disconnection changes nothing; a
switch away is timed until it is synced again; a new fabric syncs nothing."""

from types import SimpleNamespace

from syncfabric.services.switch_connections import SwitchConnections


def datapath(dpid):
    return SimpleNamespace(id=dpid)


def test_a_late_disconnection_of_a_replaced_datapath_changes_nothing():
    connections, old, new = SwitchConnections(), datapath(1), datapath(1)
    connections.connected(old)
    connections.connected(new)   # the switch reconnected before its old connection closed
    assert not connections.is_current(old) and connections.is_current(new)
    assert not connections.gone(old, 5.0)
    assert connections.datapaths == {1: new} and connections.away_for(1, 6.0) is None
    assert connections.gone(new, 7.0) and connections.datapaths == {}
    assert not connections.is_current(datapath(None))


def test_a_switch_is_away_from_its_disconnection_until_it_is_synced_again():
    connections, switch = SwitchConnections(), datapath(2)
    connections.connected(switch)
    connections.synced.add(2)
    assert connections.synced_datapaths() == {2: switch}
    connections.gone(switch, 10.0)
    assert connections.away_for(2, 12.5) == 2.5 and connections.absent(2, grace_over=False)
    connections.connected(switch)
    assert connections.away_for(2, 13.0) == 3.0   # connected, but not synced yet
    connections.synced.add(2)
    assert connections.away_for(2, 14.0) is None


def test_a_new_fabric_syncs_nothing_and_counts_only_the_connected_as_seen():
    connections = SwitchConnections()
    connections.connected(datapath(3))
    connections.synced.add(3)
    connections.fabric_loaded()
    assert connections.synced == set() and connections.seen == {3}
    assert not connections.absent(3, grace_over=True)          # connected
    assert not connections.absent(4, grace_over=False)         # never seen, within the grace
    assert connections.absent(4, grace_over=True)
