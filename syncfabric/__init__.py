"""syncfabric: network-aware communication for distributed training, as a library that
imports neither Ryu nor Mininet. Each folder is a layer, and imports point down only:

- decisions/: pure algorithms, graph in and decision out (trees, the book, receiver
  selection, gradient plans, GRID, InArt, the round planner).
- openflow/: decisions become OpenFlow messages (builders), are reconciled with what a
  switch holds (switch_sync) and confirmed by barriers (installer).
- services/: requests and `now` in, bookings and messages out, with no Ryu (fabric,
  trees, SELMCAST rounds, INA plans, jobs, and their moves after faults).
- operator/: what an operator reads (metrics, the OpenAPI description, the live page).
- hosts/: what runs on a training host or an aggregator host: the job library, the
  aggregator daemon and the data paths (Python and native); it needs only numpy.
- torch/: the PyTorch DDP communication hook over hosts/.

The Ryu apps that load these services are in apps/; the experiments drive Mininet.
"""
