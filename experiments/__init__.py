"""Testbeds, traffic generators and experiment runners for syncfabric."""
