"""A live job's parts at another rate (no Ryu): the same paths, nodes, shards and
fragment shares, with every gradient stream, return tree and meter scaled by the new
rate over the old. Nothing the hosts sum changes, only how fast they send, so a job can
be moved to its fair share between two rounds without losing or re-summing any.

A RateChange is booked in the fabric's book (book: a rise only if it fits, so the
book never passes a capacity), adopted by the trees and INA plans services (what
they report and what a switch that syncs is given), and put on the switches (meters:
the meters of its streams and trees are modified in place). The caller orders these:
a rise puts its meters on before the hosts are told; a fall after they stop using
the old rates (services/tenants.py).
"""

from dataclasses import replace

from syncfabric.decisions.gradient_plan import NO_SHARE
from syncfabric.decisions.multicast_trees import switch_shares
from syncfabric.decisions.plan_admission import plan_shares
from syncfabric.openflow import steering_messages as steering
from syncfabric.openflow.tree_messages import tree_changes
from syncfabric.services.ina_plans import plan_report
from syncfabric.services.job_shares import part_loads


class RateChange:
    """Job `job` (installed, with its plan live) at gradient rate `rate` Mbit/s."""

    def __init__(self, job, trees, plans, rate):
        self.job, self.trees, self.plans = job, trees, plans
        self.live = plans.plans[job.plan_id]
        self.old_rate, self.rate = self.live.result.f, rate
        factor = rate / self.old_rate
        self.old_result, self.result = self.live.result, replace(self.live.result, f=rate)
        self.reservations = [trees.book.get(tree_id) for tree_id in job.tree_ids]
        self.new_trees = [replace(r.tree, bandwidth_mbps=r.tree.bandwidth_mbps * factor)
                          for r in self.reservations]

    def new_loads(self):
        """{link or aggregator: Mbit/s} the job's plan and trees hold at the new rate."""
        return part_loads(self.result, self.new_trees)

    @property
    def grows(self):
        return self.rate > self.old_rate

    def book(self):
        """Book the new rates in the book in place of the old; ReservationError (and
        nothing changes) if a rise does not fit what others hold."""
        self.trees.book.rebook(self.live.hold_key, self.result.loads(),
                               self._trees(self.new_trees), check=self.grows)

    def unbook(self):
        """Book the old rates again (the new ones were not confirmed by the switches)."""
        self.trees.book.rebook(self.live.hold_key, self.old_result.loads(),
                               self._trees([r.tree for r in self.reservations]))

    def _trees(self, trees):
        """{tree id: tree}: the job's reservations on `trees`, in order."""
        return {r.tree_id: tree for r, tree in zip(self.reservations, trees)}

    def adopt(self, now):
        """The services report the new rates, and give them to a switch that syncs."""
        view = self.trees.book.view
        live = self.live
        live.result = self.result
        live.report = plan_report(live.id, live.request, self.result, view,
                                  live.report["revision"])
        live.shares = plan_shares(view, live.request, self.result, live.report["ports"])
        self.plans.remember()
        self.trees.remember(now)

    def meters(self, fabric):
        """{datapath: messages} that set the job's meters to the new rates on every
        connected switch (a switch away gets them when it syncs)."""
        view, messages = self.trees.book.view, {}
        old_shares = plan_shares(view, self.live.request, self.old_result,
                                 self.live.report["ports"])
        new_shares = plan_shares(view, self.live.request, self.result, self.live.report["ports"])
        for switch, share in new_shares.items():
            datapath = fabric.datapath_of(switch)
            if datapath is not None:
                make, _break = steering.steering_changes(datapath, self.live.id,
                                                   old_shares.get(switch, NO_SHARE), share)
                messages.setdefault(datapath, []).extend(make)
        for reservation, tree in zip(self.reservations, self.new_trees):
            old_tree_shares = switch_shares(view, reservation.tree)
            for switch, share in switch_shares(view, tree).items():
                datapath = fabric.datapath_of(switch)
                if datapath is not None:
                    make, _break = tree_changes(datapath, reservation.tree_id,
                                                reservation.address,
                                                old_tree_shares.get(switch), share)
                    messages.setdefault(datapath, []).extend(make)
        return {datapath: batch for datapath, batch in messages.items() if batch}
