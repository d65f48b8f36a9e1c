"""What a benchmark's figures depend on besides our code: the CPU, the kernel, the
kernel's speculative-execution mitigations and how memory is given. Machines of one
kind differ in what the kernel charges per system call and per datagram (retbleed's
return thunks, retpolines), and a VM whose free memory goes back to its host pays for
every page it writes first (docs/datapath.md, "Memory a round writes"), so host
benchmarks record these beside their figures, and two machines' CSVs can be compared."""

import os
import platform
import re
import socket
from pathlib import Path

VULNERABILITIES = Path("/sys/devices/system/cpu/vulnerabilities")
HUGE_PAGES = Path("/sys/kernel/mm/transparent_hugepage/enabled")
VIRTIO_DEVICES = Path("/sys/bus/virtio/devices")
PAGE_REPORTING_ORDER = Path("/sys/module/page_reporting/parameters/page_reporting_order")
BALLOON = "0x0005"         # the virtio balloon's device id
FREE_PAGE_REPORTING = 5    # its feature bit: free pages reported to the host
COLUMNS = ["kernel", "cpu_model", "mitigations", "memory"]


def cpu_model(cpuinfo=Path("/proc/cpuinfo")):
    """The CPU's model name (platform.processor() where /proc has none)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def mitigations(directory=VULNERABILITIES):
    """"name: state | ..." of every vulnerability the kernel reports on that is not "Not
    affected", sorted by name ("none reported" if the kernel reports none)."""
    try:
        entries = sorted(directory.iterdir())
    except OSError:
        return "none reported"
    states = [(entry.name, entry.read_text().strip()) for entry in entries]
    found = ["%s: %s" % (name, state) for name, state in states if state != "Not affected"]
    return " | ".join(found) if found else "none reported"


def huge_pages(enabled=HUGE_PAGES):
    """The transparent huge pages mode the kernel is in ("madvise"; "unknown")."""
    try:
        chosen = re.search(r"\[(\w+)\]", enabled.read_text())
    except OSError:
        return "unknown"
    return chosen.group(1) if chosen else "unknown"


def free_pages_reported(devices=VIRTIO_DEVICES, order=PAGE_REPORTING_ORDER):
    """Whether a virtio balloon reports free pages to the host (which takes them back),
    and in what blocks: "2048 KB blocks", or "no"."""
    try:
        balloons = [device for device in devices.iterdir()
                    if (device / "device").read_text().strip() == BALLOON]
        features = [(device / "features").read_text().strip() for device in balloons]
    except OSError:
        return "no"
    if not any(len(bits) > FREE_PAGE_REPORTING and bits[FREE_PAGE_REPORTING] == "1"
               for bits in features):
        return "no"
    try:
        return "%d KB blocks" % (4 << int(order.read_text()))
    except (OSError, ValueError):
        return "yes"


def memory():
    """How the machine gives memory, in words: its huge pages mode and whether free
    pages go back to a host."""
    return "transparent huge pages: %s; free pages reported to the host: %s" % (
        huge_pages(), free_pages_reported())


def machine():
    """{cpu, cores, kernel, hostname, mitigations, memory}: the machine a benchmark ran
    on."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "kernel": platform.release(),
            "hostname": socket.gethostname(), "mitigations": mitigations(),
            "memory": memory()}


def csv_columns():
    """{kernel, cpu_model, mitigations, memory}: the machine's columns of a benchmark's
    rows."""
    facts = machine()
    return {"kernel": facts["kernel"], "cpu_model": facts["cpu"],
            "mitigations": facts["mitigations"], "memory": facts["memory"]}
