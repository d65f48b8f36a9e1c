"""Host programs started on a testbed's hosts for one job, through the small interface
every testbed implements: address(name), the host's data-plane IP; interface(name), the
name of its data-plane interface; and popen(name, command, **popen_arguments), a process
running in that host (experiments/testbed.py does all three with Mininet)."""

import subprocess


def run_in_hosts(bed, names, command, drive, what):
    """Start `command --name N --data-ip IP` in each named host of the testbed, run
    drive() (which talks to them), and return its result once they have ended. If
    drive() fails, kill them and raise RuntimeError with the end of their output."""
    processes = [bed.popen(name, command + ["--name", name, "--data-ip", bed.address(name)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for name in names]
    try:
        result = drive()
    except BaseException as error:
        for process in processes:
            process.kill()
        output = [p.communicate()[0][-600:] for p in processes]
        raise RuntimeError("%s failed: %s\nprocesses: %s" % (what, error, [o for o in output if o])) \
            from error
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
    return result
