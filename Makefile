# `make demo` and `make test` set up whatever is missing first (idempotent, seconds when done):
# Debian packages, Open vSwitch running for the userspace datapath, and the virtual environment.
SHELL := /bin/bash
VENV := .venv
PYTHON := $(VENV)/bin/python
SYSTEM_PYTHON := /usr/bin/python3
OVS_CTL := /usr/share/openvswitch/scripts/ovs-ctl
APT_PACKAGES := openvswitch-switch mininet iperf iperf3 ethtool iputils-ping iproute2 \
	net-tools psmisc curl python3-venv build-essential python3-dev chromium chromium-driver

.PHONY: setup apt ovs venv leftovers calibrate demo fabric-check test unit-test native-check fuzz fuzz-datapath fuzz-api ui-pictures figures figures-emulated clean

setup: apt ovs venv

apt:
	@missing=$$(for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# OVS's one transmit socket takes net.core.wmem_default when it opens: 1 GiB, so that every
# switch port's queue can fill before a send fails; its ports' sockets take rmem_default:
# 4 MiB, for bursts (DataPlane's, mininet_topos/data_plane.py: a test holds them equal)
ovs: apt
	@sysctl -q -w net.core.wmem_default=1073741824 net.core.rmem_default=4194304
	@ovs-vsctl --timeout=5 show >/dev/null 2>&1 || $(OVS_CTL) start --system-id=random

venv: $(VENV)/.installed

# The native data path's sources: a change rebuilds it. With gcc here, the build must
# succeed without a warning (SYNCFABRIC_NATIVE=required, setup.py): the suite never runs on
# the Python fallback by accident. A user's pip install without a compiler still falls back.
NATIVE_SOURCES := $(wildcard syncfabric/hosts/datapath/*.c syncfabric/hosts/datapath/*.h)
NATIVE_REQUIRED = $$(command -v gcc >/dev/null && echo required)

$(VENV)/.installed: setup.cfg setup.py Makefile $(NATIVE_SOURCES) | apt
	test -x $(PYTHON) || $(SYSTEM_PYTHON) -m venv --system-site-packages $(VENV)
	# torch first, exactly the CPU build the experiments measure: nothing then pulls another
	$(PYTHON) -m pip install -q --disable-pip-version-check torch==2.13.0
	SYNCFABRIC_NATIVE=$(NATIVE_REQUIRED) \
		$(PYTHON) -m pip install -q --disable-pip-version-check -e '.[controller,torch,test]'
	# only syncfabric is a package to install; the checkout's root goes on the venv's path so
	# that ryu-manager finds apps.x_controller and python -m finds experiments from anywhere
	echo "$(CURDIR)" > "$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/syncfabric-checkout.pth"
	touch $@

# What a dead emulation left (a crash, a machine restart: OVS keeps bridges across restarts) is
# removed before a run; a live emulation is reported and left alone.
leftovers: setup
	$(PYTHON) -m experiments.leftovers

# What this machine's emulated fabric sustains (about a minute), for --bw auto; `make demo`
# calibrates first when results/platform.json is missing.
PLATFORM := results/platform.json
calibrate: setup leftovers
	$(PYTHON) -m experiments.calibrate --out $(PLATFORM)

$(PLATFORM): | setup leftovers
	$(PYTHON) -m experiments.calibrate --out $(PLATFORM)

# The main demo: a PS on an 8x8 spine-leaf sends a real model, sized so that it takes 2 s at the
# calibrated link rate (S/b = 2 s), to 3 and to 15 workers by unicast, random multicast and
# path-aware multicast; prints the table (faithful rows only), writes CSV + PNG.
demo: setup leftovers $(PLATFORM)
	$(PYTHON) -m experiments.ps_distribution --spines 8 --leaves 8 --hosts-per-leaf 2 --bw auto \
		--workers 3,15 --model-mb auto --rounds 1 --out results/demo.csv

fabric-check: setup leftovers
	$(PYTHON) -m experiments.fabric_check --spines 8 --leaves 8 --hosts-per-leaf 2 --bw 20

# The unit tests run in 3 processes (pytest-xdist), a file to each at a time: half of their time
# is waiting on subprocesses, sockets and timers, so 2 cores finish them in half the time. The
# integration tests run one at a time after them, alone on the machine: each emulates a fabric.
UNIT_TESTS := -m 'not integration' -n 3 --dist loadfile

test: setup leftovers native-check
	$(PYTHON) -m pytest $(UNIT_TESTS)
	$(PYTHON) -m pytest -m integration

unit-test: venv native-check
	$(PYTHON) -m pytest $(UNIT_TESTS)

# Where gcc is, the suite runs on the native data path it built, never on the fallback.
native-check:
	@if command -v gcc >/dev/null && ! $(PYTHON) -c 'import syncfabric.hosts.datapath._native'; then \
		echo "the native data path is not built though gcc is here: make setup again" >&2; exit 1; fi

# Both fuzzers: the host data paths, then the REST API.
fuzz: fuzz-datapath fuzz-api

# The host data paths fuzzed for FUZZ_S seconds (default 300): the native one built with
# AddressSanitizer and UndefinedBehaviorSanitizer into build/fuzz (the installed one is left
# as it is), both fed the same hostile datagrams and scripted receives (experiments/fuzzing;
# make test runs a bounded number of the same). Crashing inputs go to results/fuzz/.
FUZZ_S ?= 300
SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g
fuzz-datapath: setup
	rm -rf build/fuzz build/fuzz-temp
	SYNCFABRIC_NATIVE=required SYNCFABRIC_NATIVE_CFLAGS="$(SANITIZE)" \
		$(PYTHON) setup.py -q build_ext --build-lib build/fuzz --build-temp build/fuzz-temp
	$(PYTHON) -m experiments.datapath_fuzz --seconds $(FUZZ_S) --native build/fuzz \
		--out results/fuzz/datapath_fuzz.csv

# The REST API fuzzed against its OpenAPI description (schemathesis) on a live controller
# over a 2x2 Mininet fabric: 2000 examples per operation (make test runs 200). Root.
fuzz-api: setup leftovers
	$(PYTHON) -m experiments.api_fuzz --examples 2000 --out results/api_fuzz.csv

# The README's pictures of the live page (GET /ui), from an 8x8 fabric in headless Chromium.
ui-pictures: setup leftovers
	$(PYTHON) -m experiments.ui_pictures --out docs/figures

# Every figure we reproduce, into results/figures/: the simulated ones always (about 7
# minutes on 2 cores), the emulated ones too with `make figures EMULATED=1` (Mininet, root,
# about an hour more, at the link rates calibrated on this machine; `make figures-emulated`
# runs only those). The README's table says which paper claim each one is about.
FIGURES := results/figures
figures: setup
	$(PYTHON) -m experiments.sim.ps_multicast --out $(FIGURES)/sim_ps_multicast.csv
	$(PYTHON) -m experiments.sim.selmcast --out $(FIGURES)/sim_selmcast.csv
	$(PYTHON) -m experiments.sim.ina --links counted,paper --out $(FIGURES)/sim_ina.csv
	$(PYTHON) -m experiments.ina_optimality --out $(FIGURES)/ina_optimality.csv
	$(PYTHON) -m experiments.sim.ina --parts inart --hetero --out $(FIGURES)/sim_inart_hetero.csv
	$(PYTHON) -m experiments.selmcast_selection --n 4,6,8,10 --out $(FIGURES)/selmcast_vs_milp.csv
	$(PYTHON) -m experiments.sim.emulation_check --out $(FIGURES)/emulation_check.csv
ifeq ($(EMULATED),1)
	$(MAKE) figures-emulated
endif

figures-emulated: setup leftovers $(PLATFORM)
	$(PYTHON) -m experiments.ps_distribution --workers 3,7,15 --rounds 3 \
		--out $(FIGURES)/ps_distribution.csv
	$(PYTHON) -m experiments.load_balance --jobs 24 --out $(FIGURES)/load_balance.csv
	$(PYTHON) -m experiments.selmcast --workers 16 --rounds 3 --out $(FIGURES)/selmcast.csv
	$(PYTHON) -m experiments.grid_example --emulate --out $(FIGURES)/grid_example.csv
	$(PYTHON) -m experiments.ina --workers 8,16 --out $(FIGURES)/ina.csv
	$(PYTHON) -m experiments.inart_example --emulate --out $(FIGURES)/inart_example.csv
	$(PYTHON) -m experiments.ina --ps 2,4 --workers 16,24 --hetero --out $(FIGURES)/inart.csv
	$(PYTHON) -m experiments.train --workers 8 --rounds 12 --out $(FIGURES)/train.csv
	$(PYTHON) -m experiments.allreduce --workers 4,8,16 --rounds 5 --aggregator-bw 0.45x,1x \
		--out $(FIGURES)/allreduce.csv
	$(PYTHON) -m experiments.fault_recovery --fault link --runs 5 --out $(FIGURES)/fault_recovery.csv
	$(PYTHON) -m experiments.sim.emulation_check --emulate --ps-csv $(FIGURES)/emulated_ps_8x8.csv \
		--ina-csv $(FIGURES)/emulated_ina_8x8.csv --out $(FIGURES)/emulation_check_fresh.csv

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache results
