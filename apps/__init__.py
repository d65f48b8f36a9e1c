"""What ryu-manager loads: the five apps (fabric, multicast, selmcast, ina, job), the
services they share as one Ryu context (services.py), the REST layer (rest_json, and
rest_tls for HTTPS), the operator's endpoints, ARP replies and the launch-by-path
stand-in. Everything they decide, build and
install is in the syncfabric package, which needs no Ryu."""
