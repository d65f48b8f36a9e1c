"""SELMCAST (Luo et al., IEEE TSC) as a Ryu app: who receives whose update in a P2P round.

    ryu-manager apps.selmcast_controller      # loads apps.multicast_controller and the fabric app

A job's coordinator asks for a round (POST /selmcast/rounds). The app reads
each worker's available ingress and egress from the fabric view (host link
capacity minus what is reserved on it), selects the receivers
(receiver_selection.py), and installs one reserved tree per sender at
v_i / t through the multicast app (L7: one single-receiver tree per copy, so
the sender's link carries every copy), all or none. It returns the
assignment, the predicted round time t and the trees. DELETE releases them.
Each job keeps its history for the k-rule; a round counts as synced once its
trees are installed.

REST: POST /selmcast/rounds, GET /selmcast/rounds, GET/DELETE /selmcast/rounds/<id>.
Errors as the multicast API: 400 malformed or invalid, 404 unknown host or
round, 409 no bandwidth (with the tree's max_feasible_mbps), 503 fabric not
ready, 500 a switch rejected a tree; none leaves a tree, reservation or
history entry behind.
"""

import itertools
import random

from ryu.app.wsgi import ControllerBase, WSGIApplication, route
from ryu.base import app_manager

from apps.multicast_controller import TreeSpec
from apps.multicast_trees import POLICIES as TREE_POLICIES
from apps.receiver_selection import (COST_MODELS, L3, POLICIES, SELMCAST, RoundInput,
                                     SelectionError, SyncHistory, lower_bound, multicast_scale,
                                     normalized_completion, select)
from apps.rest_json import (RequestError, answer, answer_release, check_fields, json_response,
                             positive_number, read_json_body, release_key_of)

REST_APP_KEY = "selmcast_controller"
REQUEST_FIELDS = {"job", "workers", "update_mb", "p", "k", "cost_model", "policy", "tree_policy",
                  "ttl_s"}
DEFAULT_K = 4
MBIT_PER_MB = 8.0
# ryu-manager loads these too (ryu reads the list from the module, not the class)
_REQUIRED_APP = ["apps.multicast_controller"]


class SelmcastController(app_manager.RyuApp):
    _CONTEXTS = {"wsgi": WSGIApplication}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.histories = {}        # job -> SyncHistory
        self.rounds = {}           # round id -> report
        self.release_keys = {}     # round id -> the key that may DELETE it
        self.installing = set()    # jobs with a round between selection and installation
        self._ids = itertools.count(1)
        self.rng = random.Random()
        kwargs["wsgi"].register(SelmcastRestApi, {REST_APP_KEY: self})

    @property
    def multicast(self):
        return app_manager.lookup_service_brick("MulticastController")

    def create_round(self, body, release_key=None):
        request = parse_round_request(body)
        multicast = self.multicast
        view = multicast.ready_view()
        workers = request["workers"]
        unknown = [w for w in workers if not view.is_host(w)]
        if unknown:
            raise RequestError(404, "unknown host(s): %s" % ", ".join(unknown))
        job = request["job"]
        history = self.histories.get(job) or SyncHistory(request["k"])
        if history.k != request["k"]:
            raise RequestError(400, "job %r uses k = %d" % (job, history.k))
        if job in self.installing:
            raise RequestError(409, "a round of job %r is being installed; rounds of a job "
                                    "are sequential" % job)
        ingress, egress = host_availability(view, multicast.book.reserved_mbps, workers)
        full = [w for w, i, e in zip(workers, ingress, egress) if min(i, e) <= 0]
        if full:
            raise RequestError(409, "no bandwidth left on the link of %s" % ", ".join(full))
        forced, unsynced = history.matrices(workers)
        try:
            problem = RoundInput.build([s * MBIT_PER_MB for s in request["update_mb"]], ingress,
                                       egress, request["p"], forced, unsynced)
            selection = select(problem, request["cost_model"], request["policy"], self.rng)
        except SelectionError as error:
            raise RequestError(400, str(error)) from None
        specs = tree_specs(workers, selection, problem.sizes, request["tree_policy"])
        self.installing.add(job)
        try:   # create_trees waits for barriers: other requests run meanwhile
            reservations = multicast.create_trees(specs, request["ttl_s"])
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
            "forced_pairs": int(forced.sum() // 2),
            "assignment": {workers[i]: [workers[j] for j in chosen]
                           for i, chosen in enumerate(selection.receivers)},
            "trees": [{"id": r.tree_id, "source": r.tree.source, "receivers": list(r.tree.receivers),
                       "address": r.address, "bandwidth_mbps": r.tree.bandwidth_mbps}
                      for r in reservations]}
        self.rounds[round_id] = report
        self.release_keys[round_id] = release_key
        self.logger.info("round %d of job %r (#%d): %d workers, %s %s, t = %.3f s (%.3f x LB), "
                         "%d trees, %d forced pairs", round_id, job, report["round"],
                         len(workers), selection.policy, selection.cost_model, selection.t,
                         report["normalized_completion"], len(reservations),
                         report["forced_pairs"])
        return dict(report, release_key=release_key)

    def release_round(self, round_id):
        report = self.rounds.pop(self.get_round(round_id)["id"])   # before any yield: one DELETE wins
        round_id = report["id"]
        self.release_keys.pop(round_id, None)
        for tree in report["trees"]:
            try:
                self.multicast.release_tree(tree["id"])
            except RequestError:
                self.logger.info("round %d: tree %d was already released", round_id, tree["id"])
        self.logger.info("round %d released (%d trees)", round_id, len(report["trees"]))
        return report

    def get_round(self, round_id):
        try:
            return self.rounds[int(round_id)]
        except (ValueError, KeyError):
            raise RequestError(404, "no round with id %r" % (round_id,)) from None


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
        rate = sizes_mbit[i] / selection.t
        receivers = [workers[j] for j in chosen]
        groups = [receivers] if selection.cost_model == L3 else [[r] for r in receivers]
        specs += [TreeSpec(workers[i], group, rate, tree_policy) for group in groups if group]
    return specs


def parse_round_request(body):
    """The round request with defaults filled in, or RequestError(400)."""
    check_fields(body, REQUEST_FIELDS, {"job", "workers", "update_mb", "p"})
    request = dict({"k": DEFAULT_K, "cost_model": L3, "policy": SELMCAST,
                    "tree_policy": TREE_POLICIES[0], "ttl_s": None}, **body)
    workers = request["workers"]
    if not isinstance(request["job"], str) or not request["job"]:
        raise RequestError(400, "job must be a non-empty string")
    if (not isinstance(workers, list) or len(workers) < 2
            or not all(isinstance(w, str) for w in workers) or len(set(workers)) != len(workers)):
        raise RequestError(400, "workers must be a list of at least 2 distinct host names")
    n = len(workers)
    request["update_mb"] = per_worker(request["update_mb"], n, "update_mb", positive_number)
    request["p"] = per_worker(request["p"], n, "p", whole_number)
    if not whole_number(request["k"]) or request["k"] < 1:
        raise RequestError(400, "k must be a positive integer")
    for field, allowed in (("cost_model", COST_MODELS), ("policy", POLICIES),
                           ("tree_policy", TREE_POLICIES)):
        if request[field] not in allowed:
            raise RequestError(400, "%s must be one of %s" % (field, ", ".join(allowed)))
    ttl_s = request["ttl_s"]
    if ttl_s is not None and not positive_number(ttl_s):
        raise RequestError(400, "ttl_s must be a positive number of seconds or null")
    return request


def whole_number(value):
    return not isinstance(value, bool) and isinstance(value, int) and value >= 0


def per_worker(value, n, name, valid):
    """A number for every worker, or a list with one per worker."""
    values = value if isinstance(value, list) else [value] * n
    if len(values) != n or not all(valid(v) for v in values):
        raise RequestError(400, "%s must be one valid number or a list of %d" % (name, n))
    return values


class SelmcastRestApi(ControllerBase):
    def __init__(self, req, link, data, **config):
        super().__init__(req, link, data, **config)
        self.selmcast = data[REST_APP_KEY]

    @route("selmcast", "/selmcast/rounds", methods=["POST"])
    def create(self, req, **_kwargs):
        return answer(req, lambda: (self.selmcast.create_round(read_json_body(req),
                                                               release_key_of(req)), 201))

    @route("selmcast", "/selmcast/rounds", methods=["GET"])
    def list_rounds(self, req, **_kwargs):
        return json_response({"rounds": [self.selmcast.rounds[i] for i in sorted(self.selmcast.rounds)]})

    @route("selmcast", "/selmcast/rounds/{round_id}", methods=["GET"])
    def show(self, req, round_id, **_kwargs):
        return answer(req, lambda: (self.selmcast.get_round(round_id), 200))

    @route("selmcast", "/selmcast/rounds/{round_id}", methods=["DELETE"])
    def delete(self, req, round_id, **_kwargs):
        return answer_release(req, "round", lambda: self.selmcast.get_round(round_id)["id"],
                              self.selmcast.release_keys, self.selmcast.release_round)


if __name__ not in ("apps.selmcast_controller", "__main__"):   # ryu-manager apps/selmcast_controller.py
    from apps.launch_by_path import stand_in
    stand_in(globals())
