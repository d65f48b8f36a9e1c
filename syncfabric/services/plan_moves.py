"""Make-before-break moves of live INA plans around failed links and switches (no Ryu).

A plan whose streams cross a link that is down keeps its id, ports, nodes and rates,
with the broken streams on other paths, where capacity allows (gradient_plan.
moved_paths); otherwise it is planned again on what is left, and its job reads the
new plan (its report's `revision` counts the moves). The new switch state is
installed and confirmed beside the old one, and only then is what only the old one
had removed. A plan that fits nowhere is released, unless it crosses a switch that is
away or still connecting: then it is kept for when that switch has synced.
"""

import logging
from collections import defaultdict

from syncfabric.decisions.fabric_view import available_graph
from syncfabric.decisions.gradient_plan import NO_SHARE, PlacementError, crosses, moved_paths
from syncfabric.decisions.plan_admission import plan_shares, steering_switches
from syncfabric.decisions.reservations import ReservationError
from syncfabric.errors import Conflict, InstallFailed, InvalidRequest, NotFound, NotReady
from syncfabric.openflow import steering_messages as steering
from syncfabric.services.ina_plans import plan_report

LOG = logging.getLogger("syncfabric.ina")
RECONNECT_GRACE_S = 3.0   # a plan waits this long for a switch that disconnected to return


def move_broken(plans, now):
    """Move every live plan that crosses a link that is down. Which links are down is
    read afresh for each plan: they change while plans move."""
    if plans.generation != plans.fabric.generation:
        return
    plans.waiting.clear()   # each plan is decided again
    then_break = defaultdict(list)   # every moved plan's, sent after one drain
    for plan_id in sorted(plans.plans):
        live = plans.plans.get(plan_id)
        if live is None or not live.installed or not crosses(live.result, plans.fabric.down_links):
            continue
        with plans.metrics.reroute_seconds.labels("plans").time():
            moved = _move(plans, live, plans.fabric.down_links, now)
        for datapath, messages in (moved or {}).items():
            then_break[datapath] += messages
    plans.installer.send_after_drain(then_break)


def recheck_waiting(plans, now):
    """Timer: decide again the plans whose wait for a switch is over."""
    if any(until <= now for until in plans.waiting.values()):
        move_broken(plans, now)


def _move(plans, live, down_links, now):
    """The plan moved or planned again, installed and confirmed; returns what only the
    old plan had, to remove (None if it did not move)."""
    book, view = live.book, live.book.view
    away = [s for s in steering_switches(live.shares) if not plans.fabric.is_synced(s)]
    graph = available_graph(view, book.reserved_without(live.hold_key), down_links)
    try:
        result = live.result.with_stream_paths(moved_paths(graph, live.result.streams(), down_links))
        book.hold_if_free(live.hold_key, result.loads())   # nothing waited since graph was read
        outcome = "moved"
    except (PlacementError, ReservationError) as reason:
        # e.g. an aggregator behind a switch that is away: planned again without it,
        # unless that switch only just disconnected. Switches keep forwarding without a
        # controller, so one that reconnects with its tables costs the job nothing,
        # while planning again restarts its round
        returning = {s: plans.fabric.away_for(s, now) for s in steering_switches(live.shares)}
        recent = {s: age for s, age in returning.items() if age is not None
                  and age < RECONNECT_GRACE_S}
        if recent:
            plans.waiting[live.id] = now + RECONNECT_GRACE_S - min(recent.values())
            LOG.info("plan %d: %s; %s disconnected %.1f s ago: waiting up to %.0f s for it "
                     "before planning again", live.id, reason, ",".join(sorted(recent)),
                     min(recent.values()), RECONNECT_GRACE_S)
            return None
        LOG.info("plan %d: %s; planning it again", live.id, reason)
        try:
            result = plans.plan_and_hold(view, book, live.request, live.hold_key)
        except (InvalidRequest, Conflict, NotReady) as error:
            if away:
                LOG.warning("plan %d: no way around %s, not synced (%s); kept for when it is",
                            live.id, ",".join(away), error)
                return
            LOG.warning("plan %d crosses a failed link and no plan fits (%s): releasing it",
                        live.id, error)
            _released(plans, live, now)
            return
        if plans.plans.get(live.id) is not live:   # a DELETE took it while it was planned
            book.release_hold(live.hold_key)
            return
        outcome = "replanned"
    return _switch_over(plans, view, live, result, outcome, now)


def _switch_over(plans, view, live, result, outcome, now):
    """Install the moved plan beside the old state and confirm it; returns what only
    the old one had, to remove after a drain (None if it did not move)."""
    old_shares = live.shares
    new_shares = plan_shares(view, live.request, result, live.report["ports"])
    changes = {}
    for switch in set(old_shares) | set(new_shares):
        datapath = plans.fabric.datapath_of(switch)
        if datapath is not None:
            changes[datapath] = steering.steering_changes(datapath, live.id,
                                                    old_shares.get(switch, NO_SHARE),
                                                    new_shares.get(switch, NO_SHARE))
    live.shares = new_shares   # a switch that syncs meanwhile gets the new share
    old_streams = {switch: list(share.meters) for switch, share in old_shares.items()}
    try:
        plans.installer.install({dp: make for dp, (make, _break) in changes.items() if make})
    except InstallFailed as failure:
        LOG.error("plan %d: the moved plan was not confirmed (%s); releasing it", live.id, failure)
        _released(plans, live, now, old_streams)
        return None
    if plans.plans.get(live.id) is not live:   # a DELETE removed the old state meanwhile
        plans.remove_from_switches(view, live, old_streams)
        return None
    live.result = result
    live.report = plan_report(live.id, live.request, result, view, live.report["revision"] + 1)
    plans.remember()
    plans.metrics.reroutes.labels("plans", outcome).inc()
    LOG.info("plan %d (job %r) %s around failed link(s): theta %.3f Mbit/s, revision %d",
             live.id, live.report["job"], "moved" if outcome == "moved" else "planned again",
             result.f, live.report["revision"])
    return {dp: then_break for dp, (_make, then_break) in changes.items()}


def _released(plans, live, now, meters=()):
    plans.metrics.reroutes.labels("plans", "released").inc()
    plans.metrics.releases.labels("plans", "reroute").inc()
    try:
        plans.release(live.id, now, meters)
    except NotFound:
        pass   # a DELETE released it meanwhile
