"""What a host's datagrams carry, byte for byte: the chunk wire of a model's transfer and
the MTU it fills (wire), the gradient fragment and its header, and the sums a node keeps
of them (gradient_wire), and the JSON control datagrams of a job's repairs and hellos
(control_messages). It imports nothing else of the host side: everything below reads
and writes these formats."""
