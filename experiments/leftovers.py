"""Remove what a dead emulation left (our OVS bridges, their links, the management bridge,
the namespaces of experiments.namespace_fabric).

A run killed mid-way (a crash, a machine restart) leaves bridges that OVS keeps in its
database across restarts; every later fabric then refuses to start. `make test` and
`make demo` run this first. While an emulation is live (a ryu-manager or Mininet host
is running) it touches nothing and exits 1: one emulation at a time.

    python -m experiments.leftovers [--dry-run]
"""

import sys

from experiments.cli import experiment_parser
from experiments.namespace_fabric import namespace_leftovers, remove_namespace_leftovers
from mininet_topos.ovs_state import check_ovs_running
from mininet_topos.platform_net import PlatformError, leftovers, live_run_pids, remove_leftovers


def parse_args(argv):
    parser = experiment_parser("experiments.leftovers", __doc__)
    parser.add_argument("--dry-run", action="store_true", help="report what is left, remove nothing")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        check_ovs_running()
        found, namespaces = leftovers(), namespace_leftovers()
        names = found["bridges"] + found["links"] + namespaces
        live = live_run_pids()
        if live:
            sys.exit("error: an emulation is running (pids %s); wait for it to end or stop it with "
                     "`mn -c`%s" % (" ".join(map(str, live)),
                                    "; it holds %s" % ", ".join(names) if names else ""))
        if not names:
            return
        print("leftovers: %s what a dead run left: %s"
              % ("found" if args.dry_run else "removing", ", ".join(names)), file=sys.stderr)
        if not args.dry_run:
            remove_namespace_leftovers(namespaces)
            remove_leftovers(found)
    except PlatformError as error:
        sys.exit("error: %s" % error)


if __name__ == "__main__":
    main()
