"""The REST API over TLS. With SYNCFABRIC_REST_CERT and SYNCFABRIC_REST_KEY in
ryu-manager's environment (files: the server's certificate chain and its private key),
the API answers https only; the hosts verify it against the CA file SYNCFABRIC_CA
names (syncfabric/hosts/transport/controller_client.py). Ryu's REST server has no TLS of its
own (its stream server's TLS hands a socket where eventlet's WSGI server wants the
application), so the listening socket ryu-manager's wsgi.start_service makes is
wrapped, as eventlet's documentation serves WSGI over TLS."""

import os
from pathlib import Path

import eventlet
from ryu.app import wsgi

CERT_ENV, KEY_ENV = "SYNCFABRIC_REST_CERT", "SYNCFABRIC_REST_KEY"
PLAIN_START_SERVICE = wsgi.start_service   # Ryu's, before serve_tls_if_configured


def tls_files():
    """(certificate, key) files, None without TLS; SystemExit if half of it is set or a
    file cannot be read."""
    cert, key = os.environ.get(CERT_ENV), os.environ.get(KEY_ENV)
    if not cert and not key:
        return None
    if not (cert and key):
        raise SystemExit("syncfabric: REST over TLS needs both %s and %s (the certificate "
                         "chain's file and its key's)" % (CERT_ENV, KEY_ENV))
    for path in (cert, key):
        if not Path(path).is_file():
            raise SystemExit("syncfabric: %s is not a readable file (%s, %s)"
                             % (path, CERT_ENV, KEY_ENV))
    return cert, key


def serve_tls_if_configured():
    """Have ryu-manager's REST server (wsgi.start_service, called once the apps are
    loaded) listen with TLS, when tls_files() says so."""
    files = tls_files()
    if files is None or wsgi.start_service is not PLAIN_START_SERVICE:   # none, or done
        return

    def start_service(app_manager):
        server = PLAIN_START_SERVICE(app_manager)
        if server is not None:
            server.server = eventlet.wrap_ssl(server.server, certfile=files[0],
                                              keyfile=files[1], server_side=True)
        return server
    wsgi.start_service = start_service
