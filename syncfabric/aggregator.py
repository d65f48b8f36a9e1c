"""python -m syncfabric.aggregator --controller URL: the daemon of an aggregator host (or
of a host that holds PS shards), syncfabric/hosts/jobs/job_daemon.py."""

import sys

from syncfabric.hosts.jobs.job_daemon import main

if __name__ == "__main__":
    sys.exit(main())
