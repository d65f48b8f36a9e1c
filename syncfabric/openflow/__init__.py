"""Where decisions become OpenFlow 1.3 messages, and where switches confirm them."""
