"""Checks shared by the services' request parsers; they raise InvalidRequest (400), and
check_hosts NotFound (404) for unknown hosts unless told otherwise."""

from syncfabric.errors import InvalidRequest, NotFound


def positive_number(value):
    """True for a JSON number > 0 (not a boolean)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and value > 0


def whole_number(value):
    """True for a JSON integer >= 0 (not a boolean)."""
    return not isinstance(value, bool) and isinstance(value, int) and value >= 0


def check_fields(body, allowed, required):
    """InvalidRequest unless body is a JSON object with every required field and no field
    outside `allowed`."""
    if not isinstance(body, dict):
        raise InvalidRequest("the request must be a JSON object")
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        raise InvalidRequest("unknown field(s): %s" % ", ".join(unknown))
    missing = sorted(set(required) - set(body))
    if missing:
        raise InvalidRequest("missing field(s): %s" % ", ".join(missing))


def distinct_names(value, minimum=1):
    """True for a list of at least `minimum` distinct strings."""
    return (isinstance(value, list) and len(value) >= minimum
            and all(isinstance(v, str) for v in value) and len(set(value)) == len(value))


def job_name(body):
    """The request's job: a non-empty string, else InvalidRequest."""
    if not isinstance(body["job"], str) or not body["job"]:
        raise InvalidRequest("job must be a non-empty string")
    return body["job"]


def check_hosts(view, workers, pss=(), aggregators=(), unknown_error=NotFound):
    """The hosts a request names, each in a role it can take: unknown_error for hosts the
    fabric does not have (NotFound; a job's request says InvalidRequest: its workers are
    fields of its body, not a resource), InvalidRequest for aggregators in the wrong role."""
    unknown = [h for h in [*workers, *pss, *aggregators] if not view.is_host(h)]
    if unknown:
        raise unknown_error("unknown host(s): %s" % ", ".join(unknown))
    not_aggregators = [a for a in aggregators if not view.is_aggregator(a)]
    if not_aggregators:
        raise InvalidRequest("not aggregator host(s): %s" % ", ".join(not_aggregators))
    misplaced = [h for h in workers if view.is_aggregator(h)]
    if misplaced:
        raise InvalidRequest("aggregator host(s) cannot be workers: %s" % ", ".join(misplaced))
    both = sorted(set(pss) & set(aggregators))
    if both:   # a PS in a switch sums its own shard: it aggregates for no other
        raise InvalidRequest("%s holds a PS: leave it out of aggregators" % ", ".join(both))
