"""Which figure each experiment's CSV gets, by the experiment's name, and the command
that redraws one (python -m experiments.plots)."""

from experiments.cli import ArgumentParser
from experiments.plots import (collectives, hosts, ina, jobs, multicast, planning, robustness,
                               selmcast, training)

PLOTTERS = {"ps_distribution": multicast.plot_ps_distribution,
            "load_balance": multicast.plot_load_balance,
            "sim.ps_multicast": multicast.plot_sim_ps_multicast,
            "sim.emulation_check": multicast.plot_emulation_check,
            "allreduce": training.plot_allreduce, "train": training.plot_train,
            "ddp": training.plot_ddp, "collectives": collectives.plot_collectives,
            "selmcast_selection": selmcast.plot_selmcast_selection,
            "selmcast": selmcast.plot_selmcast, "sim.selmcast": selmcast.plot_sim_selmcast,
            "ina": ina.plot_ina, "grid_example": ina.plot_ina, "inart_example": ina.plot_ina,
            "sim.ina": ina.plot_sim_ina, "ina_optimality": ina.plot_ina_optimality,
            "fault_recovery": robustness.plot_fault_recovery, "soak": robustness.plot_soak,
            "api_fuzz": robustness.plot_api_fuzz, "datapath_fuzz": robustness.plot_datapath_fuzz,
            "admission_flood": robustness.plot_admission_flood,
            "job_setup": jobs.plot_job_setup, "tenants": jobs.plot_tenants,
            "plan_quality": planning.plot_plan_quality,
            "host_bench": hosts.plot_host_bench, "host_allreduce": hosts.plot_host_allreduce}


def main(argv=None):
    parser = ArgumentParser(prog="python -m experiments.plots",
                            description="Draw an experiment's figure from its CSV (a PNG "
                                        "beside it).")
    parser.add_argument("experiment", choices=sorted(PLOTTERS), metavar="EXPERIMENT",
                        help="the experiment that wrote the CSV: %s" % ", ".join(sorted(PLOTTERS)))
    parser.add_argument("csv", nargs="+", help="its CSV file(s)")
    args = parser.parse_args(argv)
    for path in args.csv:
        print(PLOTTERS[args.experiment](path))
