"""Command-line conventions of the host programs: errors are one line on stderr with exit
status 2, and every program takes its host's name and data-plane address."""

import argparse
import sys


class ArgumentParser(argparse.ArgumentParser):
    """argparse whose errors are one line on stderr and exit status 2."""

    def error(self, message):
        sys.stderr.write("%s: error: %s (see --help)\n" % (self.prog, message))
        sys.exit(2)


def host_program_arguments(parser, coordinator=True, connect_timeout_s=30.0):
    """The arguments of every program in a host: its name and data-plane address, and
    (unless it is told whom to reach otherwise) its coordinator."""
    parser.add_argument("--name", required=True, help="this host's name in the fabric")
    parser.add_argument("--data-ip", required=True, help="this host's data-plane address")
    if coordinator:
        parser.add_argument("--coordinator", required=True, help="the coordinator's IP:port")
    parser.add_argument("--connect-timeout-s", type=float, default=connect_timeout_s)
