"""Settings several experiments share, in one place: what an emulated aggregator can sum,
how many PS shards an emulated round takes, the streaming round's modes, when a job's
workers start, and how long a model takes at the link rate."""

# an aggregator's processing capacity, as a share of the link rate (9 Mbit/s at 20)
AGGREGATOR_SHARE = 0.45
# a model's line-rate time S/b when --model-mb is auto: sized from the link rate, so that the
# transfer outweighs a round's fixed costs (a tree's set-up, the receivers' start: 0.1-0.2 s) at
# whatever rate --bw auto finds. (A fixed 2 MB model had S/b = 0.22 s at 71.4 Mbit/s, and the
# fixed costs decided the demo's ratios.)
LINE_RATE_S = 2.0
# PS shards an emulated round may take: as many as a job may have. (It was 8: 16 shards' bursts
# overflowed OVS's transmit socket and lost 10-20% of every first pass, until
# mininet_topos/data_plane.py gave that socket room.)
EMULATED_MAX_PSS = 16
# the streaming round and where its PS shards go (round_planner's placements): dedicated
# hosts, the workers' own hosts, or the aggregators in the switches
STREAM_PLACEMENT = {"stream": "dedicated", "stream-colocated": "colocated",
                    "stream-in-network": "in-network"}
STREAM_MODES = tuple(STREAM_PLACEMENT)
# from starting a job's worker programs to their first round: every one is up and the
# daemons have read the job (they read the jobs every 0.5 s)
JOB_START_S = 5.0
# a job's timed rounds start together on one schedule, this many predicted round times apart, as
# Gloo's ranks leave a barrier together (back to back, each round started when the worker's last
# sum came back, and the workers' starts drifted 30-80 ms apart at 32 workers)
ROUNDS_APART = 3.0

# hosts that are network namespaces (namespace_fabric, deploy_check): their names' prefix, and
# the Linux bridge of their management network, which `make leftovers` removes after a dead run
NAMESPACE_PREFIX = "sfns-"
NAMESPACE_MANAGEMENT_BRIDGE, NAMESPACE_MANAGEMENT_PREFIX = "sfns-mgmt", "172.31.254"

# PUT /fabric/policy's body where jobs borrow what is idle beyond their fair floors
# (experiments.tenants' fabric-borrow, experiments.collectives --borrow)
BORROW_POLICY = {"policy": "fair", "borrow": True}
