"""Jobs in a testbed: the drivers that start host programs (syncfabric.hosts) in the hosts
(launch.py) and the coordinators that run their rounds from the root namespace."""
