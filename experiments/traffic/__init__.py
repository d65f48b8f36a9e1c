"""Programs that run inside Mininet hosts: PS and workers, peers."""
