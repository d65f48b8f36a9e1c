"""What a benchmark's figures depend on besides our code: the CPU, the kernel and the
kernel's speculative-execution mitigations. Machines of one kind differ in what the
kernel charges per system call and per datagram (retbleed's return thunks, retpolines),
so host benchmarks record these beside their figures, and two machines' CSVs can be
compared (docs/datapath.md)."""

import os
import platform
import socket
from pathlib import Path

VULNERABILITIES = Path("/sys/devices/system/cpu/vulnerabilities")
COLUMNS = ["kernel", "cpu_model", "mitigations"]


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


def machine():
    """{cpu, cores, kernel, hostname, mitigations}: the machine a benchmark ran on."""
    return {"cpu": cpu_model(), "cores": os.cpu_count(), "kernel": platform.release(),
            "hostname": socket.gethostname(), "mitigations": mitigations()}


def csv_columns():
    """{kernel, cpu_model, mitigations}: the machine's columns of a benchmark's rows."""
    facts = machine()
    return {"kernel": facts["kernel"], "cpu_model": facts["cpu"],
            "mitigations": facts["mitigations"]}
