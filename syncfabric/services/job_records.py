"""A job as the jobs service holds it (Job), and as a state file keeps it across a
controller restart (job_record, restored_job)."""

from dataclasses import dataclass, field
from typing import Optional

from syncfabric.decisions import round_planner
from syncfabric.services.job_rounds import RoundReports


@dataclass
class Job:
    """A job admitted (or being admitted): its request, the planner's round, its parts."""
    id: int
    request: dict
    round: Optional[round_planner.RoundPlan] = None
    tree_ids: list = field(default_factory=list)
    plan_id: Optional[int] = None
    expires_at: Optional[float] = None
    generation: int = 1
    parts_seen: object = None   # the parts' paths and revisions the generation stands for
    installed: bool = False
    book: object = None         # the book its trees are booked in
    admitted_at: float = 0.0    # when it was admitted (or restored)
    effective_round: int = 0    # the round its generation's rates hold from
    rounds: RoundReports = field(default_factory=RoundReports)   # where its workers are



def job_record(job, release_key, now):
    """What a state file keeps of a job: its lease as seconds left at `now`."""
    return {"id": job.id, "request": job.request, "trees": job.tree_ids, "plan": job.plan_id,
            "generation": job.generation, "effective_round": job.effective_round,
            "release_key": release_key,
            "pss": job.round.pss, "return_mbps": job.round.return_mbps,
            "predicted_s": job.round.predicted_s, "bound_s": job.round.bound_s,
            "ring_s": job.round.ring_s,
            "expires_in_s": None if job.expires_at is None else job.expires_at - now}


def restored_job(record, now):
    ttl = record["expires_in_s"]
    return Job(int(record["id"]), record["request"],
               round_planner.RoundPlan(list(record["pss"]), record["return_mbps"], [], None,
                                       record["predicted_s"], record["bound_s"],
                                       record.get("ring_s")),   # None: saved before it was kept
               list(record["trees"]), int(record["plan"]), None if ttl is None else now + ttl,
               int(record["generation"]), installed=True, admitted_at=now,
               effective_round=int(record.get("effective_round", 0)))
