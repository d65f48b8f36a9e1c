"""The fabric service's bookkeeping of switch connections (no Ryu): each dpid's datapath
while it is connected, which of them are synced (reconciled since they connected), which
connected since the fabric description was loaded, and when each last went. A datapath
counts only while it is the current one of its dpid: a switch that reconnects replaces
its old connection, whose late events are then ignored."""


class SwitchConnections:
    def __init__(self):
        self.datapaths = {}     # dpid -> datapath
        self.synced = set()     # dpids reconciled
        self.seen = set()       # dpids connected since the fabric was loaded
        self.gone_at = {}       # dpid -> when it last disconnected

    def fabric_loaded(self):
        """A new description: nothing is synced in it, and the switches connected now are
        the ones it has seen."""
        self.synced.clear()
        self.seen = set(self.datapaths)
        self.gone_at = {}

    def connected(self, datapath):
        """A switch connected (again): its datapath is the current one, not synced yet."""
        self.datapaths[datapath.id] = datapath
        self.seen.add(datapath.id)
        self.synced.discard(datapath.id)

    def is_current(self, datapath):
        """Whether `datapath` is its dpid's connection now (not one it replaced)."""
        return datapath.id is not None and self.datapaths.get(datapath.id) is datapath

    def gone(self, datapath, now):
        """The current datapath of its dpid disconnected at `now`: forgotten. False (and
        nothing changes) for one that is not current."""
        if not self.is_current(datapath):
            return False
        self.gone_at[datapath.id] = now
        del self.datapaths[datapath.id]
        self.synced.discard(datapath.id)
        return True

    def away_for(self, dpid, now):
        """Seconds since the switch disconnected if it is not synced again yet; None if
        it is synced or never disconnected."""
        if dpid in self.synced or dpid not in self.gone_at:
            return None
        return now - self.gone_at[dpid]

    def absent(self, dpid, grace_over):
        """Whether a switch of the fabric counts as away: not connected, and connected
        once since the fabric was loaded, or never within the grace after loading."""
        return dpid not in self.datapaths and (dpid in self.seen or grace_over)

    def synced_datapaths(self):
        """{dpid: datapath} of the synced switches."""
        return {dpid: self.datapaths[dpid] for dpid in self.synced}
