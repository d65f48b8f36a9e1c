"""Pure decisions: a graph and a request in, a decision out. No switch, no clock, no Ryu."""
