"""What the tests share: fake switches and in-process controllers (the unit harness),\nfabric views, and the helpers around real testbeds and experiment scripts."""
