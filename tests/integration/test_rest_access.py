"""Where the controller listens, for real: the REST API (apps/rest_json.py), and the
OpenFlow channel over TLS with Open vSwitch (docs/deploy.md). Who may change what is
tested in-process, in tests/unit/test_requests.py."""

import os
import re
import socket
import subprocess
import time
import urllib.request
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from experiments.controller_process import ALL_APPS, ryu_manager_command, wait_until
from syncfabric.hosts.transport.controller_client import ControllerClient, ControllerHttpError
from tests.harness.testbeds import require_root

pytestmark = pytest.mark.integration

OF_PORT, REST_PORT = 16664, 18091


def test_without_wsapi_host_the_api_answers_on_loopback_only():
    require_root()
    port = REST_PORT + 100
    process = subprocess.Popen([ryu_manager_command(), "--wsapi-port", str(port),
                                "--ofp-tcp-listen-port", str(OF_PORT + 100), "apps.fabric_controller"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def answers():
            try:
                return ControllerClient("http://127.0.0.1:%d" % port).get("/fabric/topology")
            except OSError:
                return False
        wait_until(answers, 20, "the REST API")
        listening = subprocess.run(["ss", "-ltnH", "sport = :%d" % port], capture_output=True,
                                   text=True, check=True).stdout.split()
        assert "127.0.0.1:%d" % port in listening and "0.0.0.0:%d" % port not in listening
        outside = socket.gethostbyname(socket.gethostname())
        if not outside.startswith("127."):
            with pytest.raises(OSError):
                socket.create_connection((outside, port), timeout=2).close()
    finally:
        process.terminate()
        process.wait(timeout=10)
        time.sleep(0.2)


def test_beyond_loopback_without_a_token_the_controller_does_not_start():
    """Anyone who reached it could fill the fabric with jobs: it says how to set one."""
    require_root()
    port = REST_PORT + 200
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SYNCFABRIC_REST")}
    ended = subprocess.run([ryu_manager_command(), "--wsapi-host", "0.0.0.0", "--wsapi-port",
                            str(port), "--ofp-tcp-listen-port", str(OF_PORT + 200),
                            "apps.fabric_controller"], capture_output=True, text=True,
                           timeout=60, env=environment)
    assert ended.returncode != 0
    assert "would listen on 0.0.0.0 without a token. Set SYNCFABRIC_REST_TOKEN" in ended.stderr
    listening = subprocess.run(["ss", "-ltnH", "sport = :%d" % port], capture_output=True,
                               text=True, check=True).stdout
    assert listening.strip() == ""


def certificates(folder, name="server", ca_name="ca"):
    """A CA (made once per folder and ca_name), and a certificate it signed for
    127.0.0.1 with its key: (ca, cert, key)."""
    ca, ca_key = folder / ("%s.pem" % ca_name), folder / ("%s.key" % ca_name)
    cert, key, request = (folder / ("%s.%s" % (name, kind)) for kind in ("pem", "key", "csr"))
    names = folder / "names.cnf"
    names.write_text("subjectAltName = IP:127.0.0.1\n")
    commands = [] if ca.exists() else [
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=syncfabric test %s" % ca_name, "-keyout", ca_key, "-out", ca]]
    for command in commands + [
            ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
             "-keyout", key, "-out", request],
            ["openssl", "x509", "-req", "-in", request, "-CA", ca, "-CAkey", ca_key,
             "-CAcreateserial", "-days", "1", "-extfile", names, "-out", cert]]:
        subprocess.run([str(part) for part in command], check=True, capture_output=True)
    return ca, cert, key


def test_the_api_over_tls_is_verified_against_the_deployments_ca(tmp_path, monkeypatch):
    require_root()
    ca, cert, key = certificates(tmp_path)
    port = REST_PORT + 300
    environment = dict(os.environ, SYNCFABRIC_REST_CERT=str(cert), SYNCFABRIC_REST_KEY=str(key))
    process = subprocess.Popen([ryu_manager_command(), "--wsapi-port", str(port),
                                "--ofp-tcp-listen-port", str(OF_PORT + 300), "apps.fabric_controller"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=environment)
    url = "https://127.0.0.1:%d" % port
    try:
        monkeypatch.setenv("SYNCFABRIC_CA", str(ca))

        def answers():
            try:
                return ControllerClient(url).get("/fabric/topology") is not None
            except OSError:
                return False
        wait_until(answers, 20, "the REST API over TLS")
        monkeypatch.delenv("SYNCFABRIC_CA")   # the system's CAs do not know ours
        with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
            ControllerClient(url).get("/fabric/topology")
        with pytest.raises(OSError):   # nor does it answer plain HTTP
            ControllerClient("http://127.0.0.1:%d" % port).get("/fabric/topology")
    finally:
        process.terminate()
        process.wait(timeout=10)


TLS_SWITCHES = {"tlsspine1": 0x71, "tlsspine2": 0x72, "tlsleaf1": 0x81, "tlsleaf2": 0x82}


def tls_fabric():
    """The 2x2 fabric of TLS_SWITCHES, each leaf's port 1 and 2 patched to spine1's and
    spine2's port 1 and 2: (its description, the ovs-vsctl commands that build it)."""
    links, commands = [], []
    for name, dpid in TLS_SWITCHES.items():
        commands.append(["add-br", name, "--", "set", "bridge", name, "datapath_type=netdev",
                         "protocols=OpenFlow13", "fail_mode=secure",
                         "other-config:datapath-id=%016x" % dpid])
    for leaf_port, spine in enumerate(["tlsspine1", "tlsspine2"], start=1):
        for spine_port, leaf in enumerate(["tlsleaf1", "tlsleaf2"], start=1):
            for here, there, port in ((leaf, spine, leaf_port), (spine, leaf, spine_port)):
                commands.append(["add-port", here, "p-%s-%s" % (here[3:], there[3:]), "--", "set",
                                 "interface", "p-%s-%s" % (here[3:], there[3:]), "type=patch",
                                 "options:peer=p-%s-%s" % (there[3:], here[3:]),
                                 "ofport_request=%d" % port])
            links.append({"a": leaf, "a_port": leaf_port, "b": spine, "b_port": spine_port,
                          "capacity_mbps": 100})
    description = {"switches": [{"name": n, "dpid": d, "role": "spine" if "spine" in n else "leaf"}
                                for n, d in TLS_SWITCHES.items()],
                   "links": links, "hosts": []}
    return description, commands


def hello_after_handshake(port, context):
    """Connect to the controller's OpenFlow port over TLS: its OFPT_HELLO's first bytes,
    or None if it refused (the handshake failed, or it closed without a word)."""
    import ssl
    with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:
        try:
            with context.wrap_socket(plain) as channel:
                return channel.recv(8) or None
        except (ssl.SSLError, ConnectionError, socket.timeout):
            return None


def plain_hello(port):
    """The first bytes the OpenFlow port sends a client without TLS in 2 s (b"" if none)."""
    with socket.create_connection(("127.0.0.1", port), timeout=2) as plain:
        try:
            return plain.recv(8)
        except socket.timeout:
            return b""


def test_openflow_over_tls_connects_every_switch_and_refuses_one_without_the_cas_certificate(
        tmp_path):
    import ssl
    require_root()
    ca, controller_cert, controller_key = certificates(tmp_path, "controller")
    _ca, switch_cert, switch_key = certificates(tmp_path, "switch")
    _other_ca, rogue_cert, rogue_key = certificates(tmp_path, "rogue", ca_name="other-ca")
    of_port, port = OF_PORT + 400, REST_PORT + 400
    description, commands = tls_fabric()
    process = subprocess.Popen([ryu_manager_command(), "--ofp-listen-host", "127.0.0.1",
                                "--ofp-ssl-listen-port", str(of_port), "--ctl-privkey",
                                str(controller_key), "--ctl-cert", str(controller_cert),
                                "--ca-certs", str(ca), "--wsapi-port", str(port),
                                "apps.fabric_controller"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = ControllerClient("http://127.0.0.1:%d" % port)
    try:
        subprocess.run(["ovs-vsctl", "set-ssl", str(switch_key), str(switch_cert), str(ca)],
                       check=True)
        for command in commands:
            subprocess.run(["ovs-vsctl", *command], check=True)
        wait_until(lambda: answers(client), 20, "the REST API")
        client.put("/fabric/topology", description)
        for name in TLS_SWITCHES:
            subprocess.run(["ovs-vsctl", "set-controller", name, "ssl:127.0.0.1:%d" % of_port],
                           check=True)

        def synced():
            switches = client.get("/fabric/topology")["switches"]
            return all(s["connected"] and s["synced"] for s in switches)
        wait_until(synced, 30, "every switch to connect over TLS and sync")
        for cert, key, trusted in ((switch_cert, switch_key, ca), (rogue_cert, rogue_key, ca),
                                   (None, None, ca)):
            context = ssl.create_default_context(cafile=str(trusted))
            context.check_hostname = False
            if cert is not None:
                context.load_cert_chain(str(cert), str(key))
            hello = hello_after_handshake(of_port, context)
            if cert is switch_cert:   # the CA's certificate: the controller says hello
                assert hello is not None and hello[0] == 4 and hello[1] == 0, hello
            else:
                assert hello is None, "a client without the CA's certificate got %r" % hello
        assert plain_hello(of_port) == b""   # nor does it speak OpenFlow without TLS
    finally:
        process.terminate()
        process.wait(timeout=10)
        for name in TLS_SWITCHES:
            subprocess.run(["ovs-vsctl", "--if-exists", "del-br", name], check=False)
        subprocess.run(["ovs-vsctl", "del-ssl"], check=False)


def answers(client):
    try:
        return client.get("/fabric/topology") is not None
    except OSError:
        return False


ABUSE_REQUESTS = 1000


def state_changing_routes(spec):
    """[(method, path, body)]: every POST, PUT and DELETE the published description has,
    with ids filled in and the request body its example gives (or an empty object)."""
    routes = []
    for template, operations in sorted(spec["paths"].items()):
        path = re.sub(r"\{[^}]+\}", "1", template)
        for method in ("post", "put", "delete"):
            if method in operations:
                content = operations[method].get("requestBody", {}).get("content", {})
                example = content.get("application/json", {}).get("example", {})
                routes.append((method.upper(), path, example))
    return routes


def what_it_holds(client):
    """Everything a state-changing request could change, as the API reports it."""
    return {path: client.get(path) for path in ("/fabric/topology", "/fabric/links",
                                                "/multicast/trees", "/selmcast/rounds",
                                                "/ina/plans", "/jobs")}


def test_a_thousand_requests_without_the_token_are_refused_and_change_nothing():
    require_root()
    of_port, port = OF_PORT + 500, REST_PORT + 500
    environment = dict(os.environ, SYNCFABRIC_REST_TOKEN="sesame")
    process = subprocess.Popen([ryu_manager_command(), "--ofp-tcp-listen-port", str(of_port),
                                "--wsapi-port", str(port), *ALL_APPS],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env=environment)
    owner = ControllerClient("http://127.0.0.1:%d" % port, token="sesame")
    try:
        wait_until(lambda: answers(owner), 20, "the REST API")
        owner.put("/fabric/topology", tls_fabric()[0])
        before = what_it_holds(owner)
        routes = state_changing_routes(owner.get("/openapi.json"))
        assert {method for method, _path, _body in routes} == {"POST", "PUT", "DELETE"}
        statuses = Counter()
        for n in range(ABUSE_REQUESTS):   # without a token, or with a wrong one
            method, path, body = routes[n % len(routes)]
            stranger = ControllerClient("http://127.0.0.1:%d" % port,
                                        token="" if n % 2 else "open-sesame")
            try:
                stranger.request(method, path, body)
                statuses[method, path, 200] += 1
            except ControllerHttpError as error:
                statuses[method, path, error.status] += 1
        assert {status for _method, _path, status in statuses} == {401}, statuses
        assert len(statuses) == len(routes)   # every route was tried
        assert what_it_holds(owner) == before
        with urllib.request.urlopen(owner.base_url + "/metrics", timeout=10) as answer:
            samples = [sample for family in text_string_to_metric_families(answer.read().decode())
                       for sample in family.samples]
        assert sum(s.value for s in samples if s.name == "syncfabric_rest_requests_total"
                   and s.labels["status"] == "401") == ABUSE_REQUESTS
        assert not [s for s in samples if s.name == "syncfabric_admissions_total"]
    finally:
        process.terminate()
        process.wait(timeout=10)
