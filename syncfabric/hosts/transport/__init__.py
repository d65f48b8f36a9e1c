"""How a host talks: datagrams paced at a rate (pacing, paced_sender) and received in
batches (receivers), a rate that backs off on loss (rate_control), the TCP channel a
pattern's coordinator steers its hosts with (control_channel), and the controller's REST
API (controller_client). It may import the packets and the data paths (datapath), never
the job engine, the patterns or training built on it."""
