"""syncfabric Ryu apps and the pure decision modules they use.

Pure modules (no Ryu import): fabric_view, unicast_routes, link_load.
Ryu-facing modules: openflow_builders, arp_responder, fabric_controller.
"""
