"""Settings several experiments share, in one place: what an emulated aggregator can sum,
how many PS shards an emulated round takes, and the streaming round's modes."""

# an aggregator's processing capacity, as a share of the link rate (9 Mbit/s at 20)
AGGREGATOR_SHARE = 0.45
# PS shard processes this machine kind emulates beside the workers without loss: with 16
# workers on 2 cores, 16 shards lost 10-20% of every first pass (no switch, queue or
# socket counter saw it) and 8 lost none
EMULATED_MAX_PSS = 8
# the streaming round: PS shards on dedicated hosts, or in the workers' own hosts
STREAM_MODES = ("stream", "stream-colocated")
