"""The papers' other traffic patterns, each a host program its experiment's coordinator
steers: a model over a tree or to each worker (model_transfer, seed 000's distribution),
SELMCAST's peer rounds (peer_sync), and the load calibration sends (load_probe). They may
import packets, transport and the hosts' argument helpers (cli), never the job engine."""
