"""A live INA plan as the plans service holds it, saved for a controller restart and
booked again from what was saved (no Ryu)."""

import logging
from dataclasses import dataclass, field

from syncfabric.decisions.gradient_plan import GradientPlan
from syncfabric.decisions.plan_admission import plan_shares
from syncfabric.decisions.reservations import ReservationError
from syncfabric.errors import InvalidRequest, NotFound
from syncfabric.services.request_fields import check_hosts

LOG = logging.getLogger("syncfabric.ina")
STATE_NAME = "ina"


@dataclass
class LivePlan:
    """A plan booked in the book: the request it answers, its placement, what its job
    was told (the report) and the share of it each switch holds once installed."""
    id: int
    request: dict                  # parse_plan_request's, with the aggregators it may use
    result: GradientPlan
    report: dict
    book: object                   # the book it is held in
    shares: dict = field(default_factory=dict)   # switch -> SteeringShare installed there
    installed: bool = False

    @property
    def hold_key(self):
        return plan_hold_key(self.id)

    def record(self, release_key):
        """What a state file keeps of it."""
        return {"id": self.id, "request": self.request, "result": self.result.record(),
                "report": self.report, "release_key": release_key}


def plan_hold_key(plan_id):
    """What a plan's loads are held under in the book."""
    return ("ina", plan_id)


def save_plans(store, plans, release_keys):
    """Save the live plans ({id: LivePlan}) and their release keys for a restart."""
    store.save(STATE_NAME, {"plans": [plans[i].record(release_keys.get(i))
                                      for i in sorted(plans)]})


def restored_plans(store, view, book):
    """[(LivePlan, release key)] of the plans saved before a restart, each booked in
    `book` on `view`; one that no longer fits or names what the view lacks is logged and
    left out."""
    restored = []
    for record in (store.load(STATE_NAME) or {}).get("plans", []):
        try:
            live = restored_plan(record, view, book)
        except (KeyError, TypeError, ValueError, NotFound, InvalidRequest,
                ReservationError) as error:
            LOG.error("saved plan %s not restored: %s", record.get("id"), error)
            continue
        restored.append((live, record.get("release_key")))
        LOG.info("plan %d (job %r) restored: theta %.3f Mbit/s", live.id, live.report["job"],
                 live.result.f)
    return restored


def restored_plan(record, view, book):
    """A saved plan (LivePlan.record) booked in the new book, with its switch shares."""
    live = LivePlan(int(record["id"]), record["request"], GradientPlan.from_record(record["result"]),
                    record["report"], book, installed=True)
    check_hosts(view, live.request["workers"], live.request["pss"], live.request["aggregators"])
    book.hold_if_free(live.hold_key, live.result.loads())
    live.shares = plan_shares(view, live.request, live.result, live.report["ports"])
    return live
