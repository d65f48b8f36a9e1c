"""Command-line conventions of the host programs: errors are one line on stderr with exit
status 2, and every program takes its host's name and data-plane address."""

import argparse
import sys
import time


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


def job_program_arguments(parser, rounds):
    """The arguments of a program every worker of a job runs: the controller, the job,
    this worker's name in it, how many rounds, and when the first one starts."""
    parser.add_argument("--controller", required=True, help="the controller's REST API URL")
    parser.add_argument("--job", type=int, required=True, help="the job's id (POST /jobs)")
    parser.add_argument("--name", required=True, help="this worker's host name in the job")
    parser.add_argument("--rounds", type=int, default=rounds, help="default %(default)s")
    parser.add_argument("--start-at", type=float, default=None,
                        help="wall-clock time (seconds since the epoch) to start the first "
                             "round at, so that every worker starts together")


def wait_until(wall_clock):
    """Sleep until `wall_clock` (seconds since the epoch; None: do not wait)."""
    if wall_clock is not None:
        time.sleep(max(0.0, wall_clock - time.time()))
