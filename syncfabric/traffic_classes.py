"""The fabric's two traffic classes, named by the IP header's DSCP field, shared by the
switches' flows, the emulated fabric's queues and the hosts' sockets.

- guaranteed: everything not marked borrowed. A job's floor (its fair or weighted
  share) is sent here, paced and metered; switches serve it first.
- borrowed (DSCP 1, the Lower-Effort class of RFC 8622): what a job sends beyond its
  floor. Switches serve it only from what guaranteed traffic leaves, it has no meter
  beyond the link's rate, and it is what a queue drops first.

docs/sharing.md says how real switches map the two (strict priority queues, or
`linux-htb` with `set_queue` on OVS's kernel datapath).
"""

BORROWED_DSCP = 1
GUARANTEED_DSCP = 0
DSCP_SHIFT = 2   # the DSCP is the upper six bits of the IPv4 TOS byte


def tos_byte(dscp):
    """The IPv4 TOS byte (IP_TOS's value) that carries `dscp`, ECN bits clear."""
    if not 0 <= dscp < 64:
        raise ValueError("a DSCP is 0 to 63, not %r" % (dscp,))
    return dscp << DSCP_SHIFT
