"""The job engine, the one round engine of the host side: a job as its hosts see it
(job_layout), a worker's library (fabric_worker: FabricJob, FabricWorker, with its rounds,
sends and result arrays), the summing nodes of a shard or an aggregator (job_roles), the
aggregator daemon and its serving loops per core (job_daemon, serving_loop, core_split),
the lease and the rates it follows (job_lease, rate_following), the window of rounds a
node accepts (round_window), and job_worker, the program a benchmark's workers run. It
may import packets, transport, datapath and the hosts' argument helpers (cli)."""
