"""The InArt paper's toy example: the common sending rate of each policy, planned and
(with --emulate) measured with real gradients split between two PSs in Mininet.

    python -m experiments.inart_example [--emulate] [--out results/inart_example.csv]

Two switches v1 and v2; workers w1-w4 and PS s1 on v1, w5-w6 and PS s2 on v2;
switch (aggregator) capacity 6, PS ingress 4, links 6
(mininet_topos/inart_example.py). Prints one JSON object per policy (lbmm,
atp, equal-split, inart) with `rate` (f, a worker's whole gradient) from
syncfabric/decisions/inart_placement.py and the split `x` (the paper: 4/3, 2 and 2.5 for
LBMM, ATP and InArt), plus the LP's, the rounded and the repaired f. With
--emulate the same topology runs in Mininet at those numbers in Mbit/s; each
policy's plan runs as a job with the PSs and the policy named
(experiments/traffic/policy_rounds.py), whole-number gradients checked at every
worker as each PS's sums of its share come back: each object then also has
`measured_rate_mbps` (a worker's gradient on the wire over the round's time),
`comm_time_s`, `predicted_comm_time_s` (the job's round, returns included) and
`verified`. Writes a CSV and a PNG.
"""


from experiments import fidelity
from experiments.worked_examples import example_main
from mininet_topos.description import describe
from mininet_topos.inart_example import HOSTS_ON, PSS, InartExampleTopo
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.inart_placement import ATP, EQUAL_SPLIT, INART, LBMM, InartProblem, plan

POLICIES = (LBMM, ATP, EQUAL_SPLIT, INART)
WORKERS = sorted((h for hs in HOSTS_ON.values() for h in hs if h not in PSS),
                 key=lambda w: int(w[1:]))
COLUMNS = ["policy", "workers", "rate", "x", "f_lp", "f_rounded", "f_repaired",
           "measured_rate_mbps", "comm_time_s", "predicted_comm_time_s", "verified",
           "repair_passes"] + fidelity.COLUMNS


def planned(topo):
    view = FabricView(describe(topo))
    problem = InartProblem(view.graph, WORKERS, PSS, view.aggregators)
    rows = []
    for policy in POLICIES:
        result = plan(problem, policy)
        rows.append({"policy": policy, "workers": len(WORKERS), "rate": result.f,
                     "x": {s: round(x, 6) for s, x in result.split.items()}, "f_lp": result.f_lp,
                     "f_rounded": result.f_rounded, "f_repaired": result.f_repaired})
    return rows


def main(argv=None):
    example_main(argv, "inart_example", __doc__, InartExampleTopo(), planned, WORKERS, PSS,
                 "measured_rate_mbps", COLUMNS)

if __name__ == "__main__":
    main()
