"""What this machine's emulated fabric sustains, as `experiments.calibrate` measured it
(results/platform.json), and the link rate `--bw auto` turns into."""

import json
import math
import os
from pathlib import Path

from mininet_topos.data_plane import BASELINE, DataPlane

PLATFORM_FILE = Path(os.environ.get("SYNCFABRIC_PLATFORM_FILE", "results/platform.json"))
SAFE_FRACTION = 0.7       # of the calibrated rate: at 0.8, 5 MB to 15 workers lost 1-2% (2 s
                          # trials miss the stalls of longer transfers)
PATTERNS = ("multicast", "all-to-one", "all-to-all")


class NotCalibrated(RuntimeError):
    pass


def load(path=None):
    """The calibration, if it was made for the data plane the experiments run on."""
    path = Path(path or PLATFORM_FILE)
    try:
        platform = json.loads(path.read_text())
    except FileNotFoundError:
        raise NotCalibrated("%s is missing: run `make calibrate` (python -m experiments.calibrate) "
                            "on this machine first, or give --bw" % path) from None
    if platform.get("mtu", BASELINE.mtu) != DataPlane.mtu:
        raise NotCalibrated("%s was calibrated at MTU %s, and the fabric now runs at %d: run "
                            "`make calibrate` again, or give --bw" % (path, platform.get("mtu"),
                                                                     DataPlane.mtu))
    return platform


def calibrated_mbps(platform, pattern):
    """The highest per-link rate at which the fabric carried `pattern` cleanly."""
    return platform["patterns"][pattern]["max_mbps"]


def all_to_all_capacity_mbps(platform):
    """What this machine's fabric carries all-to-all in all, at the safe fraction: its
    calibrated fabric's hosts times the rate found (0 for a platform file without its
    host count). The datapath's cost is per packet, on one core, so any fabric of this
    machine shares out the same total."""
    return SAFE_FRACTION * platform.get("hosts", 0) * calibrated_mbps(platform, "all-to-all")


def largest_all_to_all(platform, link_mbps):
    """How many hosts can send all-to-all at link_mbps each as cleanly as calibration saw."""
    return int(all_to_all_capacity_mbps(platform) / link_mbps * 1.01)   # 1%: --bw auto's rounding


def capacity_warning(link_mbps, hosts, path=None):
    """A warning if `hosts` sending all-to-all at link_mbps are more than this machine
    carries cleanly (largest_all_to_all), else None (also when it is not calibrated)."""
    try:
        platform = load(path)
    except NotCalibrated:
        return None
    largest = largest_all_to_all(platform, link_mbps)
    if not largest or hosts <= largest:
        return None
    return ("warning: %d hosts at %g Mbit/s are more than the %d this machine carries all-to-all "
            "cleanly (%s): give a --bw of at most %.1f, or expect rows flagged not faithful, "
            "or rounds slowed by the machine"
            % (hosts, link_mbps, largest, path or PLATFORM_FILE,
               all_to_all_capacity_mbps(platform) / hosts))


def fitting_rate(link_mbps, load_mbps, path=None):
    """(rate, why): link_mbps and None if load_mbps of flows at link_mbps (a load that
    scales with the rate) are no more than this machine carries all-to-all cleanly;
    else the highest rate (to 0.1 Mbit/s) at which they are, and why."""
    capacity = all_to_all_capacity_mbps(load(path))
    if not 0 < capacity < load_mbps:
        return link_mbps, None
    return math.floor(link_mbps * capacity / load_mbps * 10) / 10, (
        "%.0f Mbit/s of flows at %g Mbit/s, more than the %.0f this machine carries cleanly"
        % (load_mbps, link_mbps, capacity))


def resolve_bw(bw, pattern, path=None):
    """(rate, note) for an experiment whose heaviest traffic is `pattern`: with bw "auto",
    a safe fraction of the calibrated rate; an explicit rate above the calibrated one
    is kept, with a warning as the note."""
    if bw != "auto":
        rate = float(bw)
        try:
            platform = load(path)
        except NotCalibrated:
            return rate, None
        limit = calibrated_mbps(platform, pattern)
        if rate <= limit:
            return rate, None
        return rate, ("warning: --bw %g is above the %g Mbit/s at which this machine carried %s "
                      "cleanly (%s): expect loss from the CPU, and rows flagged not faithful"
                      % (rate, limit, pattern, path or PLATFORM_FILE))
    platform = load(path)
    rate = round(SAFE_FRACTION * calibrated_mbps(platform, pattern), 1)
    return rate, ("--bw auto: %g Mbit/s per link (%.0f%% of the %g Mbit/s calibrated for %s on "
                  "%s, %s, on the fabric %s; python -m experiments.calibrate --topo "
                  "calibrates another)"
                  % (rate, 100 * SAFE_FRACTION, calibrated_mbps(platform, pattern), pattern,
                     platform["machine"]["cpu"], platform["date"][:10],
                     platform.get("fabric", "?")))


def bw_argument(text):
    """argparse type of --bw: "auto" or a number (the topology checks that it is positive)."""
    return text if text == "auto" else float(text)
