"""What runs on a host: the job library (the wire format, pacing, rate control,
receivers and repair, the control channel, a client of the controller) and the host
programs built on it. It imports neither Ryu nor Mininet nor the controller's layers,
so it runs on any Linux host."""
