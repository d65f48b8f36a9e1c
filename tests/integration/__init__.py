"""Tests of the real thing: ryu-manager, Open vSwitch, Mininet, real packets."""
