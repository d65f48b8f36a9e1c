"""syncfabric's controller: pure decisions, Ryu-free services, one installer, thin Ryu apps.

Decisions (pure: graph in, decision out): fabric_view, unicast_routes, link_load,
multicast_trees, reservations (the ledger), receiver_selection, gradient_plan,
exact_placement, ina_placement, inart_placement, sparse_lp.
Services (no Ryu; decisions and `now` in, bookings and OpenFlow messages out):
fabric_service, multicast_service, tree_reroutes, selmcast_service, ina_service,
plan_moves, with service_errors and request_fields.
Messages and their confirmation: openflow_builders, switch_sync (a connecting switch's
contents against what is wanted there), installer.
Ryu apps (events, REST calls and timers to their service): fabric_controller,
multicast_controller, selmcast_controller, ina_controller, sharing services.py as one
Ryu context; rest_json, arp_responder, state_files and launch_by_path serve them.
"""
