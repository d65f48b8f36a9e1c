"""The machine a host benchmark ran on (experiments/machine_facts.py): the CPU model
and the mitigations the kernel reports, from files laid out as /proc and /sys lay
them out."""

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
