"""Group moves over a StreamAssignment (stream_assignment), after its single moves: all
the streams of the bottleneck to one aggregate, and all the members of one aggregate to
another (a merge), a whole group at once. Each candidate is tried and undone; the one
that betters the score most is kept, then single moves run again."""

MAX_GROUP_ROUNDS = 16
SMALL_GROUP = 12   # groups this small are also tried without each one of their streams


def group_candidates(assignment):
    """(aggregate, its path, streams) to move there together: the bottleneck's streams
    to each aggregate they can join (and, for a small group, all but one of them), and
    the members of each aggregate in use to each other one; every path of the target."""
    joinable = {}   # aggregate -> streams with an option that joins it
    for key, choices in assignment.group_options.items():
        for option in choices:
            aggregate = assignment.aggregate_of(key, option)
            if aggregate is not None:
                joinable.setdefault(aggregate, set()).add(key)
    streams, _aggregates = assignment.bottleneck_users(assignment.ratios())
    groups = []
    for aggregate, keys in joinable.items():
        group = [key for key in streams if key in keys]
        groups.append((aggregate, group))
        if 2 < len(group) <= SMALL_GROUP:
            groups += [(aggregate, group[:i] + group[i + 1:]) for i in range(len(group))]
    for source in [a for a in joinable if assignment.members.get(a)]:
        members = [key for key, option in assignment.choice.items()
                   if assignment.aggregate_of(key, option) == source]
        groups += [(target, members) for target, keys in joinable.items()
                   if target != source and keys.issuperset(members)]
    return [(aggregate, path, group) for aggregate, group in groups if group
            for path in assignment.aggregate_paths[aggregate]]


def join_greedily(assignment, aggregate, path, group):
    """Do the group move: the aggregate on `path`, then each stream to its option that
    joins it with the most headroom left; returns how to undo it."""
    undo = [("path", aggregate, assignment.paths[aggregate])]
    if path != assignment.paths[aggregate]:
        if assignment.members.get(aggregate):
            assignment.apply(assignment.aggregate_delta(aggregate, path))
        assignment.paths[aggregate] = path
    load, capacity = assignment.load, assignment.capacity
    for key in group:
        joins = [o for o in assignment.group_options[key]
                 if assignment.aggregate_of(key, o) == aggregate]
        option = min(joins, key=lambda o: max((load[i] + assignment.weight[key]) / capacity[i]
                                              for i in assignment.stream_resources(key, o)))
        if option != assignment.choice[key]:
            undo.append(("stream", key, assignment.move(key, option)))
    return undo


def undo_moves(assignment, undo):
    for kind, who, what in reversed(undo):
        if kind == "stream":
            assignment.move(who, what)
        elif what != assignment.paths[who]:
            if assignment.members.get(who):
                assignment.apply(assignment.aggregate_delta(who, what))
            assignment.paths[who] = what


def best_group_move(assignment):
    """Take the group move that betters the score most, as single moves do: theta, or
    the same theta with fewer resources at it (with 32 workers and 8 shards in their
    hosts, several shards took two aggregates each: merging one of them raised no
    theta, and the plan stayed at half the LP's rate); False if none does."""
    current, best = assignment.score(), None
    for candidate in group_candidates(assignment):
        undo = join_greedily(assignment, *candidate)
        score = assignment.score()
        undo_moves(assignment, undo)
        if assignment.better(score, current) and (best is None or assignment.better(score, best[0])):
            best = (score, candidate)
    if best is None:
        return False
    join_greedily(assignment, *best[1])
    return True


def improve_groups(assignment):
    """A group move that betters the score, then single moves, while that helps (each
    move betters it, so this ends; MAX_GROUP_ROUNDS bounds the time)."""
    for _round in range(MAX_GROUP_ROUNDS):
        if not best_group_move(assignment):
            return
        assignment.improve()
