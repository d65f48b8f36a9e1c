"""The machine a host benchmark ran on (experiments/machine_facts.py): the CPU model,
the mitigations the kernel reports and how it gives memory, from files laid out as
/proc and /sys lay them out."""

from experiments import machine_facts


def test_the_cpu_model_is_the_first_model_name(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC\n\nprocessor\t: 1\n"
                       "model name\t: AMD EPYC\n")
    assert machine_facts.cpu_model(cpuinfo) == "AMD EPYC"


def test_mitigations_name_every_vulnerability_that_is_not_unaffected(tmp_path):
    for name, state in [("retbleed", "Mitigation: untrained return thunk; SMT disabled"),
                        ("meltdown", "Not affected"),
                        ("spectre_v2", "Mitigation: Retpolines; STIBP: disabled")]:
        (tmp_path / name).write_text(state + "\n")
    assert machine_facts.mitigations(tmp_path) == (
        "retbleed: Mitigation: untrained return thunk; SMT disabled | "
        "spectre_v2: Mitigation: Retpolines; STIBP: disabled")


def test_a_kernel_that_reports_nothing_says_so(tmp_path):
    assert machine_facts.mitigations(tmp_path) == "none reported"
    assert machine_facts.mitigations(tmp_path / "absent") == "none reported"


def test_the_huge_pages_mode_is_the_one_in_brackets(tmp_path):
    enabled = tmp_path / "enabled"
    enabled.write_text("always [madvise] never\n")
    assert machine_facts.huge_pages(enabled) == "madvise"
    assert machine_facts.huge_pages(tmp_path / "absent") == "unknown"


def balloon(devices, features, device_id="0x0005"):
    device = devices / ("virtio%d" % len(list(devices.iterdir())))
    device.mkdir()
    (device / "device").write_text(device_id + "\n")
    (device / "features").write_text(features + "\n")


def test_free_pages_count_as_reported_only_with_a_balloon_that_has_the_feature(tmp_path):
    devices, order = tmp_path / "devices", tmp_path / "page_reporting_order"
    devices.mkdir()
    order.write_text("9\n")
    reporting = "011001010000"   # bit 5: free page reporting
    balloon(devices, reporting, device_id="0x0001")   # a network device with that bit
    assert machine_facts.free_pages_reported(devices, order) == "no"
    balloon(devices, "011000010000")   # a balloon without it
    assert machine_facts.free_pages_reported(devices, order) == "no"
    balloon(devices, reporting)
    assert machine_facts.free_pages_reported(devices, order) == "2048 KB blocks"
    assert machine_facts.free_pages_reported(devices, tmp_path / "absent") == "yes"
    assert machine_facts.free_pages_reported(tmp_path / "absent", order) == "no"
