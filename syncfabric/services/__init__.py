"""The controller's services, without Ryu: each takes requests, decisions and `now`, keeps
its bookings in the fabric's book and returns or installs OpenFlow messages."""
