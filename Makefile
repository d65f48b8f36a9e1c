# `make demo` and `make test` set up whatever is missing first (idempotent, seconds when done):
# Debian packages, Open vSwitch running for the userspace datapath, and the virtual environment.
SHELL := /bin/bash
VENV := .venv
PYTHON := $(VENV)/bin/python
SYSTEM_PYTHON := /usr/bin/python3
OVS_CTL := /usr/share/openvswitch/scripts/ovs-ctl
APT_PACKAGES := openvswitch-switch mininet iperf iperf3 ethtool iputils-ping iproute2 \
	net-tools psmisc curl python3-venv

.PHONY: setup apt ovs venv demo fabric-check test unit-test clean

setup: apt ovs venv

apt:
	@missing=$$(for p in $(APT_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || echo $$p; \
	done); \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

ovs: apt
	@ovs-vsctl --timeout=5 show >/dev/null 2>&1 || $(OVS_CTL) start --system-id=random

venv: $(VENV)/.installed

$(VENV)/.installed: setup.cfg setup.py | apt
	test -x $(PYTHON) || $(SYSTEM_PYTHON) -m venv --system-site-packages $(VENV)
	$(PYTHON) -m pip install -q --disable-pip-version-check -e '.[test]'
	touch $@

# The main demo: a PS on an 8x8 spine-leaf sends a real 2 MB model to 3 and to 15 workers by
# unicast, random multicast and path-aware multicast; prints the table, writes CSV + PNG.
demo: setup
	$(PYTHON) -m experiments.ps_distribution --spines 8 --leaves 8 --hosts-per-leaf 2 --bw 20 \
		--workers 3,15 --model-mb 2 --rounds 1 --out results/demo.csv

fabric-check: setup
	$(PYTHON) -m experiments.fabric_check --spines 8 --leaves 8 --hosts-per-leaf 2 --bw 20

test: setup
	$(PYTHON) -m pytest

unit-test: venv
	$(PYTHON) -m pytest -m 'not integration'

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache results
