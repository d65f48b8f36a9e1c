"""Whether a job's aggregator daemons are alive, and why a job was released.

Each daemon names its host when it polls GET /jobs (?host=). A job whose daemon has
polled and then stays silent for the job's lease time (SILENT_S for a job without a
lease), counted from the job's admission at the earliest, is released: its shards or
aggregations are not served, so its rounds cannot finish, and its reservations would
lock other jobs out for nothing. A daemon that never polled is not counted here: the
workers' hello names its host before the first round (job_roles.wait_until_served).
Why a job was released is kept for REASON_KEPT_S for GET /jobs/<id> to say."""

SILENT_S = 30.0
REASON_KEPT_S = 600.0


class DaemonWatch:
    def __init__(self):
        self.heard_at = {}   # host -> when its daemon last polled
        self.reasons = {}    # job id -> (why it was released, until when it is said)

    def heard_from(self, host, now):
        self.heard_at[host] = now

    def silent(self, job, hosts, now):
        """The first of `hosts` (the job's daemons) silent for the job's lease time, or
        None."""
        limit_s = job.request.get("ttl_s") or SILENT_S
        for host in sorted(hosts):
            heard = self.heard_at.get(host)
            if heard is not None and now - max(heard, job.admitted_at) > limit_s:
                return host
        return None

    def released(self, job_id, reason, now):
        self.reasons = {i: kept for i, kept in self.reasons.items() if kept[1] > now}
        self.reasons[job_id] = (reason, now + REASON_KEPT_S)

    def why_released(self, job_id):
        """{"released": why} for a job released lately; {} for any other id."""
        try:
            reason, _until = self.reasons[int(job_id)]
        except (KeyError, TypeError, ValueError):
            return {}
        return {"released": reason}


def daemon_hosts(job, plans, now):
    """The hosts whose daemon serves a part of the job: its shards' hosts that are not
    its workers, and its plan's aggregators."""
    workers = set(job.request["workers"])
    aggregators = {a["aggregator"] for a in plans.show(job.plan_id, now)["aggregates"]}
    return {host for host in job.round.pss if host not in workers} | aggregators
