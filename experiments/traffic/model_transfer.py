"""Parameter distribution in a testbed: the PS and worker programs
(syncfabric/hosts/patterns/model_transfer.py) started in their hosts for one job."""

import json
import subprocess
import sys

from experiments.traffic.launch import run_in_hosts


def run_transfer(bed, ps, workers, mode, model_mb, rate_mbps, rounds=1, timeout_s=600):
    """Run one PS (host name) and its workers inside the testbed's hosts; returns the
    PS's per-round results. Raises RuntimeError with the programs' output on failure."""
    command = [sys.executable, "-m", "syncfabric.hosts.patterns.model_transfer"]

    def drive():
        server = bed.popen(
            ps, command + ["ps", "--name", ps, "--data-ip", bed.address(ps), "--workers",
                       ",".join(workers), "--mode", mode, "--controller", bed.management_url,
                       "--model-mb", str(model_mb), "--rate-mbps", str(rate_mbps),
                       "--rounds", str(rounds)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            output, errors = server.communicate(timeout=timeout_s)
        finally:
            if server.poll() is None:
                server.kill()
        if server.returncode != 0:
            raise RuntimeError("PS exited with %d: %s" % (server.returncode, errors.strip()[-2000:]))
        return [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    return run_in_hosts(bed, workers, command + ["worker", "--ps", bed.address(ps)], drive,
                        "the model transfer")
