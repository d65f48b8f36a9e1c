"""The GRID paper's worked example: the minimum worker rate of each policy, planned and
(with --emulate) measured with real gradients on the triangle in Mininet.

    python -m experiments.grid_example [--emulate] [--out results/grid_example.csv]

Prints one JSON object per policy (no-ina, nearest, grid) with `min_rate` from
syncfabric/decisions/ina_placement.py in the paper's units (expected 1, 2.4375 and 3), plus
the LP's, the rounded and the repaired theta. With --emulate, the triangle
of mininet_topos/grid_example.py runs with links of 3 Mbit/s, PS ingress 9
and aggregator capacity 9; each policy's plan runs as a job with the PS and the
policy named (experiments/traffic/policy_rounds.py), whole-number gradients
checked at every worker as the sums come back: each object then also has
`measured_min_rate_mbps` (a worker's gradient on the wire, headers included,
over the round's time), `comm_time_s`, `predicted_comm_time_s` (the job's round,
returns included) and `verified`. Writes a CSV and a PNG.
"""


from experiments import fidelity
from experiments.worked_examples import example_main
from mininet_topos.description import describe
from mininet_topos.grid_example import WORKERS_ON, GridExampleTopo
from syncfabric.decisions.fabric_view import FabricView
from syncfabric.decisions.ina_placement import plan
from syncfabric.decisions.ina_problem import GRID, NEAREST, NO_INA, InaProblem

POLICIES = (NO_INA, NEAREST, GRID)
WORKERS = sorted((w for ws in WORKERS_ON.values() for w in ws), key=lambda w: int(w[1:]))
COLUMNS = ["policy", "workers", "min_rate", "theta_lp", "theta_rounded", "theta_repaired",
           "measured_min_rate_mbps", "comm_time_s", "predicted_comm_time_s", "verified",
           "repair_passes"] + fidelity.COLUMNS


def planned(topo):
    view = FabricView(describe(topo))
    rows = []
    for policy in POLICIES:
        result = plan(InaProblem(view.graph, WORKERS, "ps", view.aggregators), policy)
        rows.append({"policy": policy, "workers": len(WORKERS), "min_rate": result.f,
                     "theta_lp": result.f_lp, "theta_rounded": result.f_rounded,
                     "theta_repaired": result.f_repaired})
    return rows


def main(argv=None):
    example_main(argv, "grid_example", __doc__, GridExampleTopo(), planned, WORKERS, ["ps"],
                 "measured_min_rate_mbps", COLUMNS)

if __name__ == "__main__":
    main()
