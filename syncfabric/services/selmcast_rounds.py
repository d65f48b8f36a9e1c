"""The SELMCAST rounds service (no Ryu; Luo et al., IEEE TSC): who receives whose update in
a P2P round, installed as reserved trees through the trees service.

Each worker's available ingress and egress is its host link's capacity minus what the
fabric's book holds on it; receiver_selection picks the receivers; one tree per
sender at v_i / t (L7: one single-receiver tree per copy, so the sender's link carries
every copy) is created all or none. Each job keeps its history for the k-rule; a round
counts as synced once its trees are installed.
"""

import itertools
import logging
import random

from syncfabric.decisions.multicast_trees import POLICIES as TREE_POLICIES
from syncfabric.decisions.receiver_selection import select
from syncfabric.decisions.selection_round import (COST_MODELS, L3, POLICIES, SELMCAST, RoundInput,
                                                  SelectionError, lower_bound, multicast_scale,
                                                  normalized_completion)
from syncfabric.decisions.sync_history import SyncHistory
from syncfabric.errors import Conflict, InvalidRequest, NotFound
from syncfabric.services.request_fields import (check_fields, distinct_names, job_name,
                                                positive_number, whole_number)
from syncfabric.services.trees import TreeSpec

LOG = logging.getLogger("syncfabric.selmcast")
REQUEST_FIELDS = {"job", "workers", "update_mb", "p", "k", "cost_model", "policy", "tree_policy",
                  "ttl_s"}
DEFAULT_K = 4
STATE_NAME = "selmcast"
MBIT_PER_MB = 8.0


class SelmcastRounds:
    def __init__(self, fabric, trees, store, metrics, offload, rng=None):
        self.fabric, self.trees, self.store, self.metrics = fabric, trees, store, metrics
        self.offload = offload     # offload(fn, *args): fn(*args) off the event loop
        self.rng = rng or random.Random()
        self.histories = {}        # job -> SyncHistory
        self.rounds = {}           # round id -> report
        self.release_keys = {}     # round id -> the key that may DELETE it
        self.installing = set()    # jobs with a round between selection and installation
        self._ids = itertools.count(1)

    # --- the REST resource ------------------------------------------------------

    def list(self, _now):
        return {"rounds": [self.rounds[i] for i in sorted(self.rounds)]}

    def live_count(self):
        return len(self.rounds)

    def show(self, round_id, _now):
        return self._get(round_id)

    def owner_key(self, round_id):
        return self.release_keys.get(self._get(round_id)["id"])

    def _get(self, round_id):
        try:
            return self.rounds[int(round_id)]
        except (ValueError, TypeError, KeyError):
            raise NotFound("no round with id %r" % (round_id,)) from None

    def create(self, body, release_key, now):
        request = parse_round_request(body)
        book = self.trees.ready_book()
        view = book.view
        workers = request["workers"]
        unknown = [w for w in workers if not view.is_host(w)]
        if unknown:
            raise NotFound("unknown host(s): %s" % ", ".join(unknown))
        job = request["job"]
        history = self.histories.get(job) or SyncHistory(request["k"])
        if history.k != request["k"]:
            raise InvalidRequest("job %r uses k = %d" % (job, history.k))
        if job in self.installing:
            raise Conflict("a round of job %r is being installed; rounds of a job are "
                           "sequential" % job)
        self.installing.add(job)
        try:   # selecting (off the event loop) and installing wait: other requests run meanwhile
            problem, selection, reservations = self._select_and_install(request, book, history,
                                                                        now)
        finally:
            self.installing.discard(job)
        self.histories[job] = history
        history.record_round(workers, selection.receivers)
        round_id = next(self._ids)
        report = {
            "id": round_id, "job": job, "round": history.completed_rounds,
            "workers": workers, "policy": selection.policy, "cost_model": selection.cost_model,
            "t_s": selection.t, "lower_bound_s": lower_bound(problem, selection.cost_model),
            "normalized_completion": normalized_completion(selection, problem),
            "multicast_scale": multicast_scale(selection),
            "forced_pairs": int(problem.forced.sum() // 2),
            "assignment": {workers[i]: [workers[j] for j in chosen]
                           for i, chosen in enumerate(selection.receivers)},
            "trees": [{"id": r.tree_id, "source": r.tree.source, "receivers": list(r.tree.receivers),
                       "address": r.address, "bandwidth_mbps": r.tree.bandwidth_mbps}
                      for r in reservations]}
        self.rounds[round_id] = report
        self.release_keys[round_id] = release_key
        self.remember()
        ratio = report["normalized_completion"]
        LOG.info("round %d of job %r (#%d): %d workers, %s %s, t = %.3f s (%s x LB), %d trees, "
                 "%d forced pairs", round_id, job, report["round"], len(workers), selection.policy,
                 selection.cost_model, selection.t, "n/a" if ratio is None else "%.3f" % ratio,
                 len(reservations), report["forced_pairs"])
        return dict(report, release_key=release_key)

    def _select_and_install(self, request, book, history, now):
        """Pick the round's receivers on what the book leaves free, then create its trees
        (admitted by the book as they are then)."""
        workers = request["workers"]
        ingress, egress = host_availability(book.view, book.reserved_mbps, workers)
        full = [w for w, i, e in zip(workers, ingress, egress) if min(i, e) <= 0]
        if full:
            raise Conflict("no bandwidth left on the link of %s" % ", ".join(full))
        forced, unsynced = history.matrices(workers)
        try:
            problem = RoundInput.build([s * MBIT_PER_MB for s in request["update_mb"]], ingress,
                                       egress, request["p"], forced, unsynced)
            with self.metrics.planning_seconds.labels("selmcast").time():
                selection = self.offload(select, problem, request["cost_model"],
                                         request["policy"], self.rng)
        except SelectionError as error:
            raise InvalidRequest(str(error)) from None
        specs = tree_specs(workers, selection, problem.sizes, request["tree_policy"])
        return problem, selection, self.trees.create_trees(specs, request["ttl_s"], None, now)

    def release(self, round_id, now):
        report = self.rounds.pop(self._get(round_id)["id"])   # before anything waits: one DELETE wins
        round_id = report["id"]
        self.release_keys.pop(round_id, None)
        self.remember()
        for tree in report["trees"]:
            try:
                self.trees.release_tree(tree["id"], now)
            except NotFound:
                LOG.info("round %d: tree %d was already released", round_id, tree["id"])
        LOG.info("round %d released (%d trees)", round_id, len(report["trees"]))
        return report

    def follow(self, now):
        """Timer: release whole every round that lost a tree (the trees service released
        it: nothing fit around a fault), as a job that loses a part is. Not while the
        trees of a restart are still being restored (their rounds came back first)."""
        if self.trees.book is None or self.trees.generation != self.fabric.generation:
            return
        live = {reservation.tree_id for reservation in self.trees.book}
        for round_id in sorted(self.rounds):
            lost = [t["id"] for t in self.rounds[round_id]["trees"] if t["id"] not in live]
            if lost:
                LOG.warning("round %d lost tree(s) %s (nothing fit around a fault): released",
                            round_id, lost)
                self.release(round_id, now)
                self.metrics.releases.labels("rounds", "reroute").inc()

    # --- persistence and events -------------------------------------------------

    def remember(self):
        """Save the live rounds and every job's history for a restart (the trees service
        saves the rounds' trees)."""
        self.store.save(STATE_NAME, {
            "rounds": [dict(self.rounds[i], release_key=self.release_keys.get(i))
                       for i in sorted(self.rounds)],
            "histories": {job: history.record_data() for job, history in self.histories.items()}})

    def fabric_changed(self, restored):
        """A new fabric released every tree, and with them the rounds; after a restart,
        the saved rounds (whose trees the trees service restores) and histories return."""
        self.rounds.clear()
        self.release_keys.clear()
        saved = (self.store.load(STATE_NAME) or {}) if restored else {}
        for job, data in saved.get("histories", {}).items():
            try:
                self.histories[job] = SyncHistory.from_record_data(data)
            except (SelectionError, KeyError, TypeError, ValueError) as error:
                LOG.error("saved history of job %r not restored: %s", job, error)
        for report in saved.get("rounds", []):
            try:
                round_id = int(report["id"])
            except (KeyError, TypeError, ValueError):
                LOG.error("saved round not restored: %r", report)
                continue
            self.release_keys[round_id] = report.pop("release_key", None)
            self.rounds[round_id] = report
            self._ids = itertools.count(max(round_id + 1, next(self._ids)))
            LOG.info("round %d of job %r restored (%d trees)", round_id, report.get("job"),
                     len(report.get("trees", [])))
        self.remember()


def host_availability(view, reserved_mbps, workers):
    """(ingress, egress) Mbit/s per worker: its host link's capacity minus reservations."""
    ingress, egress = [], []
    for worker in workers:
        switch, _port = view.attachment(worker)
        for direction, (tail, head) in ((ingress, (worker, switch)), (egress, (switch, worker))):
            capacity = view.graph.edges[tail, head]["capacity_mbps"]
            direction.append(capacity - reserved_mbps.get((tail, head), 0.0))
    return ingress, egress


def tree_specs(workers, selection, sizes_mbit, tree_policy):
    """One tree per sender at v_i / t (L3); one per copy at v_i / t (L7 fan-out)."""
    specs = []
    for i, chosen in enumerate(selection.receivers):
        if not chosen:   # sends nothing this round (then t may be 0)
            continue
        rate = sizes_mbit[i] / selection.t
        receivers = [workers[j] for j in chosen]
        groups = [receivers] if selection.cost_model == L3 else [[r] for r in receivers]
        specs += [TreeSpec(workers[i], group, rate, tree_policy) for group in groups]
    return specs


def parse_round_request(body):
    """The round request with defaults filled in, or InvalidRequest."""
    check_fields(body, REQUEST_FIELDS, {"job", "workers", "update_mb", "p"})
    request = dict({"k": DEFAULT_K, "cost_model": L3, "policy": SELMCAST,
                    "tree_policy": TREE_POLICIES[0], "ttl_s": None}, **body)
    job_name(request)
    workers = request["workers"]
    if not distinct_names(workers, minimum=2):
        raise InvalidRequest("workers must be a list of at least 2 distinct host names")
    n = len(workers)
    request["update_mb"] = per_worker(request["update_mb"], n, "update_mb", positive_number)
    request["p"] = per_worker(request["p"], n, "p", whole_number)
    if not whole_number(request["k"]) or request["k"] < 1:
        raise InvalidRequest("k must be a positive integer")
    for field, allowed in (("cost_model", COST_MODELS), ("policy", POLICIES),
                           ("tree_policy", TREE_POLICIES)):
        if request[field] not in allowed:
            raise InvalidRequest("%s must be one of %s" % (field, ", ".join(allowed)))
    ttl_s = request["ttl_s"]
    if ttl_s is not None and not positive_number(ttl_s):
        raise InvalidRequest("ttl_s must be a positive number of seconds or null")
    return request


def per_worker(value, n, name, valid):
    """A number for every worker, or a list with one per worker."""
    values = value if isinstance(value, list) else [value] * n
    if len(values) != n or not all(valid(v) for v in values):
        raise InvalidRequest("%s must be one valid number or a list of %d" % (name, n))
    return values
