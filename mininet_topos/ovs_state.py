"""Whether this machine's Open vSwitch runs and which bridges it holds, asked with
ovs-vsctl alone: importable where Mininet is not (the data-plane settings and the
calibration's capacity check need it, and jobs also run on plain namespaces)."""

import shutil
import subprocess


class PlatformError(RuntimeError):
    """The machine is not ready for a fabric (a one-line reason)."""


def check_ovs_running():
    if shutil.which("ovs-vsctl") is None:
        raise PlatformError("Open vSwitch is not installed (run `make setup`)")
    probe = subprocess.run(["ovs-vsctl", "--timeout=5", "show"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise PlatformError("Open vSwitch is not running (start it with `make ovs` or "
                            "`/usr/share/openvswitch/scripts/ovs-ctl start`)")


def existing_bridges():
    listing = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True,
                             text=True, check=True)
    return set(listing.stdout.split())
