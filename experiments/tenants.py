"""Many jobs on one fabric, as tenants run them: each job arrives, runs its rounds and
leaves, while the others run. Each mode runs the same jobs, in the same run:
- gloo: every job all-reduces with Gloo (what jobs that share a network through TCP
  run today);
- fabric-first-come: jobs through the controller (POST /jobs) under the first-come
  policy; a job refused with 409 falls back to Gloo, as the hook's fallback=True does;
- fabric-fair: the same under the fair policy: max-min fair rates, live jobs
  re-planned as jobs come and go (services/tenants.py);
- fabric-borrow: fair shares as floors, and what is idle borrowed beyond them in the
  borrowed class (syncfabric/traffic_classes.py, docs/sharing.md);
- fabric-interleave: as fabric-borrow, and jobs that share a link take turns to
  communicate, each starting its rounds in its window (services/job_phases.py);
- fabric-floor: as fabric-borrow, but job 0 asks not to borrow (POST /jobs
  {"borrow": false}): whether its floor holds beside jobs that borrow all they can.

    python -m experiments.tenants --jobs 4 --workers-per-job 8 --arrivals staggered \\
        --out results/tenants.csv

An 8x8 spine-leaf with 4 hosts per leaf and an aggregator host on every spine (their
daemons serve every job); job k's workers are the k-th host of every leaf (so every
job spans the fabric), arriving k x --apart seconds after the first (staggered) or
all at once (together). Each job is a --model-bytes all-reduce (or job k's of the
--model-mb mix) of --rounds rounds of whole-number gradients, every sum checked, back to
back or --compute-s apart (a training step's compute). Before the jobs share, each runs
--solo-rounds alone (solo_round_s). --bw auto fits the rate to every job at once.
Every shaped interface has the guaranteed and borrowed classes (docs/sharing.md), in
every mode.

The CSV has one row per mode, job and round: `started_s` (since the mode's first job
arrived), `round_s`, `iteration_s` (to the next round's start: the round and the
compute), `concurrent_jobs` (jobs running while it ran), `solo_round_s` and
`solo_iteration_s`, `share_mbps` and `fair_share_mbps` (the controller's, that round),
`generation`, `verified`, the fidelity verdict and, for a fabric job, its workers'
gradient datagrams in each class: `guaranteed_bytes`, `borrowed_bytes` and
`borrowed_lost` (datagrams), and under interleaving the job's window then:
`period_s` and `phase_offset_s`; `floor_only`, whether the job kept to its floor; and
what the switch ports' queues dropped in each class over the mode's shared run (the
same in each of its rows): `guaranteed_dropped` and `borrowed_dropped` (datagrams). The
summary gives, per mode, Jain's index of the jobs' goodput while all run, how far
rounds are from what their share predicts, the spread of the jobs' round times, the
rates after each departure, the mean job completion time, the queues' drops and, for a
job that kept to its floor, its rounds against what its floor predicts. The PNG plots
each job's round time against time.
"""

import statistics
import sys
import time

from tqdm import tqdm

from experiments import fidelity
from experiments.cli import (announce_rate, comma_list, csv_out_argument, experiment_parser,
                             fabric_arguments, fabric_host_count, finish_emulated_run,
                             fit_auto_rate, job_fabric, progress_printer)
from experiments.defaults import AGGREGATOR_SHARE, BORROW_POLICY
from experiments.plots.jobs import plot_tenants
from experiments.tenant_summary import summary
from experiments.testbed import FabricTestbed
from experiments.traffic.jobs import job_daemons, job_round_fidelity, plan_load_mbps
from experiments.traffic.tenant_jobs import Tenant, fabric_rounds, gloo_rounds, run_tenants
from mininet_topos.data_plane import DataPlane
from mininet_topos.platform_net import switch_class_counters
from syncfabric.decisions import round_planner
from syncfabric.hosts.packets.gradient_wire import wire_mbit
from syncfabric.hosts.packets.wire import data_mtu

COLUMNS = ["mode", "job", "round", "started_s", "round_s", "concurrent_jobs", "solo_round_s",
           "share_mbps", "fair_share_mbps", "generation", "verified", "fidelity_ok",
           "fidelity_reason", "ran_as", "predicted_s", "arrived_s", "left_s", "model_mb",
           "link_mbps", "iteration_s", "solo_iteration_s", "guaranteed_bytes", "borrowed_bytes",
           "borrowed_lost", "period_s", "phase_offset_s", "floor_only", "guaranteed_dropped",
           "borrowed_dropped"]
# the fabric's policy in each mode (PUT /fabric/policy's body)
POLICY_OF = {"fabric-first-come": {"policy": "first-come"}, "fabric-fair": {"policy": "fair"},
             "fabric-borrow": BORROW_POLICY,
             "fabric-interleave": {"policy": "fair", "interleave": True},
             "fabric-floor": BORROW_POLICY}
FLOOR_ONLY = {"fabric-floor": 0}   # the mode's job that asks not to borrow
MODES = ("gloo",) + tuple(POLICY_OF)
ARRIVALS = ("staggered", "together")
PLACEMENTS = (round_planner.IN_NETWORK, round_planner.COLOCATED)
FIRST_ARRIVAL_S = 1.0   # after the mode's jobs are set up
WORKER_LOAD_PER_RANK_S = 0.15   # a job_worker loads in 0.17 s of one core, of 2
GLOO_LOAD_S, GLOO_LOAD_PER_RANK_S = 5.0, 0.8   # torch loads in 1.1 s of one core, of 2


def parse_args(argv):
    parser = experiment_parser("experiments.tenants", __doc__)
    fabric_arguments(parser, hosts_per_leaf=4, pattern="all-to-all")
    parser.add_argument("--jobs", type=int, default=4, help="jobs sharing the fabric")
    parser.add_argument("--workers-per-job", type=int, default=8, help="workers of each job")
    parser.add_argument("--arrivals", choices=ARRIVALS, default="staggered",
                        help="staggered: job k arrives k x --apart after the first; together")
    parser.add_argument("--apart", type=float, default=10.0,
                        help="seconds between staggered arrivals (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=40, help="rounds of each job")
    parser.add_argument("--solo-rounds", type=int, default=5,
                        help="rounds of each job alone, before they share (solo_round_s)")
    parser.add_argument("--placement", choices=PLACEMENTS, default=round_planner.COLOCATED,
                        help="where each job's shards are summed: the workers' own hosts or "
                             "the spines' aggregators, which every job shares (not other "
                             "hosts: they are the other jobs' workers; default %(default)s, "
                             "the shorter round the planner predicts on the default fabric)")
    parser.add_argument("--model-bytes", type=int, default=4_000_000,
                        help="each job's float32 model, bytes (a multiple of 4)")
    parser.add_argument("--model-mb", type=comma_list(float), default=None, metavar="A,B,...",
                        help="a mix of job sizes instead: job k's model is the (k mod n)-th, "
                             "in MB (10^6 bytes)")
    parser.add_argument("--compute-s", type=float, default=0.0, metavar="SECONDS",
                        help="every worker of every job waits this long between rounds, "
                             "standing in for a training step's compute; Gloo's too "
                             "(default 0: back to back)")
    parser.add_argument("--modes", type=comma_list(str, MODES), default=list(MODES),
                        help="comma list of %s" % ", ".join(MODES))
    csv_out_argument(parser, "tenants")
    args = parser.parse_args(argv)
    hosts = fabric_host_count(args)
    if not 2 <= args.workers_per_job <= 64 or args.jobs < 1 \
            or args.jobs * args.workers_per_job > hosts:
        parser.error("--jobs x --workers-per-job must fit the %d hosts, with 2 to 64 workers "
                     "a job" % hosts)
    if args.rounds < 1 or args.solo_rounds < 1 or args.apart < 0 or args.model_bytes % 4 \
            or args.model_bytes <= 0 or args.compute_s < 0:
        parser.error("--rounds and --solo-rounds must be positive, --apart and --compute-s not "
                     "negative and --model-bytes a positive multiple of 4")
    args.model_sizes = [args.model_bytes] if args.model_mb is None else \
        [int(mb * 1e6) // 4 * 4 for mb in args.model_mb]
    if min(args.model_sizes) <= 0:
        parser.error("--model-mb must be positive sizes")
    if args.bw is not None:
        fit_auto_rate(args, lambda: all_jobs_load(args))
    return args


def all_jobs_load(args):
    """Mbit/s of flows the jobs put on the fabric at args.bw, each planned alone as the
    controller plans it."""
    _topo, view, hosts = job_fabric(args, AGGREGATOR_SHARE * args.bw)
    return sum(plan_load_mbps(round_planner.plan_job(view, tenant.workers,
                                                     wire_mbit(tenant.model_bytes // 4),
                                                     args.placement))
               for tenant in tenants(args, view, hosts))


def tenants(args, view, hosts):
    """Job k: the k-th host under every top-of-rack switch (then the next ones), arriving
    as --arrivals says."""
    by_switch = {}
    for host in hosts:
        by_switch.setdefault(view.attachment(host)[0], []).append(host)
    racks = list(by_switch.values())
    spread = [rack[i] for i in range(max(map(len, racks))) for rack in racks if i < len(rack)]
    apart = args.apart if args.arrivals == "staggered" else 0.0
    return [Tenant(k, spread[k * args.workers_per_job:(k + 1) * args.workers_per_job], k * apart,
                   args.model_sizes[k % len(args.model_sizes)])
            for k in range(args.jobs)]


def job_request(args, tenant, mode):
    request = {"workers": tenant.workers, "model_bytes": tenant.model_bytes, "mtu": data_mtu(),
               "placement": args.placement}
    if floor_only(mode, tenant.index):
        request["borrow"] = False
    return request


def floor_only(mode, job):
    """Whether job `job` keeps to its floor in `mode` (asks not to borrow)."""
    return FLOOR_ONLY.get(mode) == job


def runner(bed, args, mode, rounds):
    """run_one(tenant, run, arrival) of a mode: `rounds` rounds of the tenant's job. Its
    processes are started early, alike in every mode: Gloo's ranks begin at the job's
    arrival; a fabric job's workers wait while it asks the controller at its arrival
    (its admission counts in its completion time, their loading does not)."""
    if mode == "gloo":
        def run_one(tenant, run, arrival):
            run.rows = gloo_rounds(bed, tenant.workers, tenant.model_bytes // 4, rounds, arrival,
                                   compute_s=args.compute_s)
    else:
        def run_one(tenant, run, arrival):
            fabric_rounds(bed, job_request(args, tenant, mode), rounds, run, arrival,
                          args.compute_s)
    return run_one


def first_arrival_s(mode, ranks):
    """How long after a mode is set up its first job arrives: its `ranks` processes, all
    started at once, have each loaded (Gloo's torch, and joined) by then."""
    if mode != "gloo":
        return FIRST_ARRIVAL_S + WORKER_LOAD_PER_RANK_S * ranks
    return GLOO_LOAD_S + GLOO_LOAD_PER_RANK_S * ranks


def iterations_s(rows, compute_s):
    """{round: seconds from its start to the next round's start} of one job's rows (the
    last: its round and one compute)."""
    ordered = sorted(rows, key=lambda row: row["round"])
    found = {row["round"]: later["started_at"] - row["started_at"]
             for row, later in zip(ordered, ordered[1:])}
    if ordered:
        found[ordered[-1]["round"]] = ordered[-1]["round_s"] + compute_s
    return found


def class_columns(row):
    """A fabric round's workers' gradient datagrams in each class: bytes sent guaranteed
    (first pass and repairs), bytes sent borrowed, and borrowed datagrams lost."""
    if "datagram_bytes" not in row:
        return {"guaranteed_bytes": None, "borrowed_bytes": None, "borrowed_lost": None}
    guaranteed = row["sent"] - row["borrowed"] + row["resent"]
    return {"guaranteed_bytes": guaranteed * row["datagram_bytes"],
            "borrowed_bytes": row["borrowed"] * row["datagram_bytes"],
            "borrowed_lost": row["borrowed_lost"]}


def mode_rows(args, mode, runs, solo, started_at, usage, dropped):
    """The CSV rows of one mode's shared runs; dropped: {"guaranteed", "borrowed":
    datagrams the switch ports' queues dropped meanwhile}."""
    rows = []
    spans = [(run.arrived_at, run.left_at) for run in runs]
    for run in runs:
        iteration = iterations_s(run.rows, args.compute_s)
        for row in run.rows:
            ended_at = row["started_at"] + row["round_s"]
            kept_up = (job_round_fidelity(row, usage.during(row["started_at"], ended_at))
                       if run.ran_as == "fabric" else
                       fidelity.verdict(None, None, None, 0, usage.during(row["started_at"],
                                                                          ended_at)))
            rows.append(dict(
                mode=mode, job=run.tenant.index, round=row["round"],
                started_s=round(row["started_at"] - started_at, 3), round_s=row["round_s"],
                concurrent_jobs=sum(a < ended_at and row["started_at"] < b for a, b in spans),
                solo_round_s=solo[run.tenant.index][0], share_mbps=row.get("share_mbps"),
                fair_share_mbps=row.get("fair_share_mbps"), generation=row.get("generation"),
                verified=row["verified"], fidelity_ok=kept_up["fidelity_ok"],
                fidelity_reason=kept_up["fidelity_reason"], ran_as=run.ran_as,
                predicted_s=row.get("predicted_s"),
                arrived_s=round(run.arrived_at - started_at, 3),
                left_s=round(run.left_at - started_at, 3), model_mb=run.tenant.model_bytes / 1e6,
                link_mbps=args.bw, iteration_s=round(iteration[row["round"]], 4),
                solo_iteration_s=solo[run.tenant.index][1], period_s=row.get("period_s"),
                phase_offset_s=row.get("phase_offset_s"),
                floor_only=floor_only(mode, run.tenant.index),
                guaranteed_dropped=dropped["guaranteed"], borrowed_dropped=dropped["borrowed"],
                **class_columns(row)))
    return rows


def run_mode(bed, args, mode, jobs, bar):
    """Each job alone (its solo rounds), then all of them as --arrivals says."""
    if mode in POLICY_OF:
        bed.client.put("/fabric/policy", POLICY_OF[mode])
    solo = {}
    for tenant in jobs:
        bar.set_postfix_str("%s, job %d alone" % (mode, tenant.index))
        alone, = run_tenants([Tenant(tenant.index, tenant.workers, 0.0, tenant.model_bytes)],
                             runner(bed, args, mode, args.solo_rounds),
                             time.time() + first_arrival_s(mode, len(tenant.workers)))
        if alone.failure:
            raise RuntimeError("%s, alone: %s" % (mode, alone.failure))
        solo[tenant.index] = (statistics.median(r["round_s"] for r in alone.rows),
                              statistics.median(iterations_s(alone.rows,
                                                             args.compute_s).values()))
    bar.set_postfix_str("%s, %d jobs" % (mode, len(jobs)))
    sampling = bed.sampler().start()
    counted = switch_class_counters(bed.net)
    started_at = time.time() + first_arrival_s(mode, sum(len(job.workers) for job in jobs))
    runs = run_tenants(jobs, runner(bed, args, mode, args.rounds), started_at)
    usage = sampling.stop()
    dropped = queue_drops(counted, switch_class_counters(bed.net))
    for run in runs:
        if run.refusal:
            tqdm.write("%s: job %d refused, ran over Gloo: %s" % (mode, run.tenant.index,
                                                                  run.refusal), file=sys.stderr)
        if run.failure:   # the other jobs' rounds are kept; the run fails at its end
            tqdm.write("%s: %s" % (mode, run.failure), file=sys.stderr)
            args.failures.append("%s: %s" % (mode, run.failure))
    bar.update(1)
    return mode_rows(args, mode, runs, solo, started_at, usage, dropped)


def queue_drops(before, after):
    """{"guaranteed", "borrowed": datagrams every switch port's queue of the class dropped
    between two readings of platform_net.switch_class_counters}."""
    return {name: sum(after[port][name]["dropped"] - before[port][name]["dropped"]
                      for port in after)
            for name in ("guaranteed", "borrowed")}


def run(args):
    announce_rate(args)
    topo, view, hosts = job_fabric(args, AGGREGATOR_SHARE * args.bw)
    aggregators = [h for h in topo.hosts() if topo.nodeInfo(h).get("role") == "aggregator"]
    jobs = tenants(args, view, hosts)
    rows = []
    with tqdm(total=len(args.modes), desc="modes", unit="mode", file=sys.stderr) as bar:
        with FabricTestbed(topo, of_port=args.of_port, rest_port=args.rest_port,
                           progress=progress_printer("tenants"),
                           data_plane=DataPlane(traffic_classes=True)) as bed:
            with job_daemons(bed, aggregators):
                for mode in args.modes:
                    rows += run_mode(bed, args, mode, jobs, bar)
            bed.client.put("/fabric/policy", {"policy": "fair"})
            leftovers = bed.leftovers()
    return rows, leftovers


def main(argv=None):
    args = parse_args(argv)
    args.failures = []   # jobs that failed in the shared runs (their rows are missing)
    finish_emulated_run(args, run, COLUMNS, plot_tenants, summary,
                        "groups, meters, multicast or steering flows",
                        "some round's sum differs from the exact one")
    if args.failures:
        sys.exit("error: %s" % "; ".join(args.failures))


if __name__ == "__main__":
    main()
