"""From fractional rates to one option per stream: randomized rounding's pick, the local
search that repairs a rounded plan (StreamAssignment: single moves, then group moves),
and the MILP's answer taken where it is better (with_exact). GRID and InArt share it."""

import numpy as np

from syncfabric.decisions.exact_placement import exact_assignment
from syncfabric.decisions.gradient_plan import edges_of
from syncfabric.decisions.group_moves import improve_groups
from syncfabric.decisions.ina_problem import TOLERANCE, capacity_of


def with_exact(problem, options, aggregate_paths, weight, aggregate_of, assignment, bound,
               time_s):
    """The repaired assignment, or the MILP's (exact_placement, within time_s; 0: no MILP)
    where that is better, and the bound on integral plans over these options tightened by
    the MILP's. Unless the MILP proved its answer optimal, group moves then try to better
    it (group_moves.improve_groups). An assignment at the bound (within the solver's
    tolerance) is optimal already: it is kept, and its rate is the bound."""
    if assignment.theta() >= bound - TOLERANCE:
        return assignment, min(bound, assignment.theta())
    exact = None if time_s <= 0 else exact_assignment(
        options, aggregate_paths, weight, aggregate_of,
        lambda resource: capacity_of(problem, resource), time_s, problem.returns)
    if exact is not None:
        if exact.f_bound is not None:
            bound = min(bound, exact.f_bound)
        if exact.f > assignment.theta() * (1 + 1e-9):
            paths = {a: exact.paths.get(a, qs[0]) for a, qs in aggregate_paths.items()}
            assignment = StreamAssignment(problem, options, aggregate_paths, exact.choice, paths,
                                          weight, aggregate_of)
            assignment.improve()
        if exact.optimal:
            return assignment, bound
    improve_groups(assignment)
    return assignment, bound


def pick(rng, weights):
    """A key of `weights` with probability proportional to its weight (the first if all 0)."""
    keys = list(weights)
    total = sum(max(v, 0.0) for v in weights.values())
    if total <= TOLERANCE:
        return keys[0]
    return rng.choices(keys, weights=[max(weights[k], 0.0) for k in keys])[0]


class StreamAssignment:
    """One option per stream and one path per aggregate in use; stream k sends at
    weight[k] * theta, an aggregate at the weight of its streams, and theta = min over
    resources of capacity / (weights on it). GRID: a stream per worker, weight 1, an
    aggregate per aggregator; InArt: a stream per (worker, PS), weight x_PS, an
    aggregate per (aggregator, PS). aggregate_of(key, option) names the aggregate the
    stream joins there, or None if the option goes to the stream's PS. The problem's
    return trees (problem.returns) add their fixed weight to their links.

    improve() is a local search over single moves (a worker to another of its
    candidate options, an aggregate to another path), scored by theta, then by
    fewer resources at theta (so that a move that frees one of two bottlenecks
    counts). A move changes few resources, so a candidate is scored from those
    and the smallest ratios of the rest. group_moves tries whole groups at once, over
    group_options (default: options; the planners give every option, also those the LP
    left at zero)."""

    SMALLEST = 64

    def __init__(self, problem, options, aggregate_paths, choice, paths, weight, aggregate_of,
                 group_options=None):
        self.problem, self.options, self.aggregate_paths = problem, options, aggregate_paths
        self.group_options = group_options or options
        self.choice, self.paths = dict(choice), dict(paths)
        self.weight, self.aggregate_of = weight, aggregate_of
        resources = {e for os in [*self.group_options.values(), *options.values(),
                                  self.choice.values()] for o in os for e in edges_of(o.path)}
        resources |= {e for qs in aggregate_paths.values() for q in qs for e in edges_of(q)}
        resources |= set(problem.returns)
        self.resources = sorted(resources, key=str) + sorted(problem.aggregators)
        self.position = {r: i for i, r in enumerate(self.resources)}
        self.capacity = np.array([capacity_of(problem, r) for r in self.resources], dtype=float)
        self.load = np.zeros(len(self.resources))
        for edge, weight in problem.returns.items():   # the return trees: fixed
            self.load[self.position[edge]] += weight
        self.members = {}   # aggregate -> streams in it
        for key, option in self.choice.items():
            self.apply(self._worker_delta(key, option, fresh=True))
            self._join(key, option, +1)

    def _join(self, key, option, change):
        aggregate = self.aggregate_of(key, option)
        if aggregate is not None:
            self.members[aggregate] = self.members.get(aggregate, 0) + change

    def _indices(self, path):
        return [self.position[e] for e in edges_of(path)]

    def stream_resources(self, key, option):
        indices = self._indices(option.path)
        if self.aggregate_of(key, option) is not None:
            indices.append(self.position[option.node])
        return indices

    def _worker_delta(self, key, option, fresh=False):
        """{resource index: change in weight} if stream `key` moved to `option`."""
        delta = {}
        weight = self.weight[key]
        old = None if fresh else self.choice[key]
        same = old is not None and self.aggregate_of(key, old) == self.aggregate_of(key, option)
        for sign, chosen in ((-1, old), (+1, option)):
            if chosen is None:
                continue
            for i in self.stream_resources(key, chosen):
                delta[i] = delta.get(i, 0) + sign * weight
            aggregate = self.aggregate_of(key, chosen)
            if aggregate is None or same:
                continue
            members = self.members.get(aggregate, 0)
            if (sign < 0 and members == 1) or (sign > 0 and members == 0):
                for i in self._indices(self.paths[aggregate]):   # the aggregate appears or goes
                    delta[i] = delta.get(i, 0) + sign * weight
        return delta

    def aggregate_delta(self, aggregate, path):
        delta = {}
        weight = self._aggregate_weight(aggregate)
        for sign, chosen in ((-1, self.paths[aggregate]), (+1, path)):
            for i in self._indices(chosen):
                delta[i] = delta.get(i, 0) + sign * weight
        return delta

    def _aggregate_weight(self, aggregate):
        return next(self.weight[k] for k, o in self.choice.items()
                    if self.aggregate_of(k, o) == aggregate)

    def apply(self, delta):
        for i, change in delta.items():
            self.load[i] += change

    def ratios(self):
        ratio = np.full(len(self.resources), np.inf)
        used = self.load > 0
        ratio[used] = self.capacity[used] / self.load[used]
        return ratio

    def theta(self):
        ratio = self.ratios()
        return float(ratio.min()) if np.isfinite(ratio).any() else 0.0

    def score(self):
        """(theta, -resources at theta) now: what a move must better (better())."""
        ratio = self.ratios()
        if not np.isfinite(ratio).any():
            return 0.0, 0
        theta = float(ratio.min())
        return theta, -int(np.count_nonzero(ratio <= theta * (1 + 1e-9)))

    @staticmethod
    def better(score, best):
        """Higher theta (beyond rounding), or the same theta with fewer resources at it."""
        theta, tight = score
        if theta > best[0] * (1 + 1e-9) + TOLERANCE:
            return True
        return theta >= best[0] * (1 - 1e-9) and tight > best[1]

    def _score(self, delta, smallest, ratio):
        """(theta, -resources at theta) after applying delta."""
        changed = []
        for i, change in delta.items():
            streams = self.load[i] + change
            changed.append(self.capacity[i] / streams if streams > 0 else np.inf)
        # every resource outside `smallest` has a ratio >= theirs (argpartition)
        others = [ratio[i] for i in smallest if i not in delta]
        values = changed + others
        if not others:   # rare: the move touches every one of the smallest
            values = list(np.delete(ratio, list(delta))) + changed
        theta = min(values)
        return theta, -sum(1 for v in values if v <= theta * (1 + 1e-9))

    def bottleneck_users(self, ratio):
        """Streams and aggregates that use a resource that sets theta."""
        tight = set(np.flatnonzero(ratio <= ratio.min() * (1 + 1e-9)).tolist())
        streams = []
        for key, option in self.choice.items():
            aggregate = self.aggregate_of(key, option)
            if tight.intersection(self.stream_resources(key, option)) or (
                    aggregate is not None
                    and tight.intersection(self._indices(self.paths[aggregate]))):
                streams.append(key)
        aggregates = [a for a in self.paths if self.members.get(a)
                      and tight.intersection(self._indices(self.paths[a]))]
        return streams, aggregates

    def move(self, key, option):
        """Move one stream to `option` now; returns the option it had."""
        old = self.choice[key]
        self.apply(self._worker_delta(key, option))
        self._join(key, old, -1)
        self._join(key, option, +1)
        self.choice[key] = option
        return old

    def improve(self):
        """Take the best single move while it raises the score (see the class doc)."""
        while True:
            ratio = self.ratios()
            if not np.isfinite(ratio).any():
                return
            count = min(self.SMALLEST, len(ratio))
            smallest = np.argpartition(ratio, count - 1)[:count].tolist()
            current = self._score({}, smallest, ratio)
            best, move = current, None
            workers, aggregators = self.bottleneck_users(ratio)
            for worker in workers:
                for option in self.options[worker]:
                    if option != self.choice[worker]:
                        score = self._score(self._worker_delta(worker, option), smallest, ratio)
                        if self.better(score, best):
                            best, move = score, ("worker", worker, option)
            for aggregator in aggregators:
                for path in self.aggregate_paths[aggregator]:
                    if path != self.paths[aggregator]:
                        score = self._score(self.aggregate_delta(aggregator, path), smallest, ratio)
                        if self.better(score, best):
                            best, move = score, ("aggregate", aggregator, path)
            if move is None:
                return
            kind, who, what = move
            if kind == "worker":
                self.move(who, what)
            else:
                self.apply(self.aggregate_delta(who, what))
                self.paths[who] = what

    def used_aggregate_paths(self):
        return {a: self.paths[a] for a in sorted(self.paths) if self.members.get(a)}
