"""The JSON fabric description that the controller is handed (PUT /fabric/topology).

It is derived from any Mininet Topo whose switches carry a dpid, whose links
carry explicit port numbers and whose hosts carry ip and mac, so the
controller's view is exactly the fabric Mininet builds.
"""


def describe(topo):
    """Return {"switches", "links", "hosts"} for `topo` (see syncfabric/decisions/fabric_view.py)."""
    switches = [{"name": name, "dpid": int(topo.nodeInfo(name)["dpid"], 16),
                 "role": topo.nodeInfo(name).get("role", "switch")}
                for name in topo.switches(sort=True)]
    links, hosts = [], []
    for node1, node2, info in topo.links(sort=True, withInfo=True):
        capacity = info.get("bw")
        if topo.isSwitch(node1) and topo.isSwitch(node2):
            links.append({"a": node1, "a_port": info["port1"], "b": node2, "b_port": info["port2"],
                          "capacity_mbps": capacity})
            continue
        host, switch, port = ((node1, node2, info["port2"]) if topo.isSwitch(node2)
                              else (node2, node1, info["port1"]))
        host_info = topo.nodeInfo(host)
        hosts.append({"name": host, "ip": host_info["ip"].split("/")[0], "mac": host_info["mac"],
                      "switch": switch, "port": port, "capacity_mbps": capacity})
        if host_info.get("role", "host") != "host":
            hosts[-1].update(role=host_info["role"], aggregation_mbps=host_info["aggregation_mbps"])
    return {"switches": switches, "links": links, "hosts": hosts}
