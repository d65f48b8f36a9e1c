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
    parser.add_argument("--job", type=job_id_argument, required=True,
                        help="the job's id (POST /jobs), or - to read it from standard input "
                             "once the job exists: a worker started before its job, loaded "
                             "when it is created")
    parser.add_argument("--name", required=True, help="this worker's host name in the job")
    parser.add_argument("--rounds", type=int, default=rounds, help="default %(default)s")
    parser.add_argument("--start-at", type=float, default=None,
                        help="wall-clock time (seconds since the epoch) to start the first "
                             "round at, so that every worker starts together")


def job_id_argument(text):
    """--job's value: a job's id, or "-" (read from standard input: job_id_of)."""
    if text == "-":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("a job's id is a whole number, or - to read it "
                                         "from standard input, not %r" % text) from None


def job_id_of(args):
    """The job's id: --job's, or for --job - the first line of standard input (the text
    as given: attaching to the job checks it)."""
    return sys.stdin.readline().strip() if args.job == "-" else args.job


def wait_until(wall_clock):
    """Sleep until `wall_clock` (seconds since the epoch; None: do not wait)."""
    if wall_clock is not None:
        time.sleep(max(0.0, wall_clock - time.time()))
