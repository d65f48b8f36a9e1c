"""What runs on a host, in layers that import downward only (tests/unit/test_layout.py):
packets (the bytes of every datagram), datapath (batched receives, sums and sends, native
or Python), transport (pacing, receivers, the control channel, the controller's client),
then the job engine (jobs: FabricJob, FabricWorker, the summing nodes and the aggregator
daemon), the papers' other traffic patterns (patterns) and training (training) on top;
cli holds the programs' shared arguments. It imports neither Ryu nor Mininet nor the
controller's layers, so it runs on any Linux host."""
