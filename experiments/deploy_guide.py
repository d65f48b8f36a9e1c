"""What the deployment guide (docs/deploy.md) tells an operator to run, as text: the
commands of its code blocks, the daemon's systemd unit, and the words and paths that
stand for what differs between deployments.

experiments/deploy_check.py runs these commands, and a test holds them equal to the
guide's: a change to the guide that the check does not follow fails that test.
"""

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "deploy.md"
UNIT = ROOT / "docs" / "syncfabric-aggregator.service"
TOKEN_HEADER = '-H "Authorization: Bearer $(cat /etc/syncfabric/rest-token)"'
CURL = "curl --cacert /etc/syncfabric/ca.pem " + TOKEN_HEADER

# the guide's commands that deploy_check runs, as the guide writes them
CONF_FOLDER = "install -d -m 700 /etc/syncfabric"
TOKEN = "python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > /etc/syncfabric/rest-token"
CA = ("openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=syncfabric-ca "
      "-keyout /etc/syncfabric/ca.key -out /etc/syncfabric/ca.pem")
CONTROLLER_REQUEST = ("openssl req -newkey rsa:2048 -nodes -subj /CN=CONTROLLER "
                      "-keyout /etc/syncfabric/controller.key -out /etc/syncfabric/controller.csr")
CONTROLLER_NAME = "echo subjectAltName=IP:CONTROLLER > /etc/syncfabric/controller.ext"
CONTROLLER_CERT = ("openssl x509 -req -in /etc/syncfabric/controller.csr "
                   "-CA /etc/syncfabric/ca.pem -CAkey /etc/syncfabric/ca.key "
                   "-CAcreateserial -days 365 -extfile /etc/syncfabric/controller.ext -out /etc/syncfabric/controller.pem")
CONTROLLER = ("SYNCFABRIC_REST_TOKEN_FILE=/etc/syncfabric/rest-token "
              "SYNCFABRIC_REST_CERT=/etc/syncfabric/controller.pem "
              "SYNCFABRIC_REST_KEY=/etc/syncfabric/controller.key "
              "SYNCFABRIC_STATE_DIR=/var/lib/syncfabric "
              "/opt/syncfabric/venv/bin/ryu-manager --ofp-listen-host CONTROLLER "
              "--ofp-tcp-listen-port 6653 --wsapi-host CONTROLLER --wsapi-port 8080 "
              "apps.job_controller")
BRIDGE = ("ovs-vsctl add-br BRIDGE -- set bridge BRIDGE protocols=OpenFlow13 fail_mode=secure "
          "other-config:datapath-id=DPID -- set-controller BRIDGE tcp:CONTROLLER:6653")
PORT = "ovs-vsctl add-port BRIDGE PORT -- set interface PORT ofport_request=NUMBER"
OFFLOADS = "ethtool -K PORT tx off rx off tso off gso off gro off"
DESCRIPTION = (CURL + " -X PUT --data @/etc/syncfabric/fabric.json "
               "https://CONTROLLER:8080/fabric/topology")
MULTICAST_ROUTE = "ip route add 224.0.0.0/4 dev IFACE"
RECEIVE_BUFFERS = "sysctl -w net.core.rmem_max=16777216"
DAEMON_TOKEN = ('echo "SYNCFABRIC_REST_TOKEN=$(cat /etc/syncfabric/rest-token)" '
                '> /etc/syncfabric/env')
DAEMON = ("/opt/syncfabric/venv/bin/python -m syncfabric.aggregator "
          "--controller https://CONTROLLER:8080 --cores 2")
JOB = (CURL + """ -X POST --data '{"workers": ["h1", "h2", "h3", "h4"], "model_bytes": 4000000}' """
       "https://CONTROLLER:8080/jobs")
SMOKE_TEST = ("SYNCFABRIC_REST_TOKEN=$(cat /etc/syncfabric/rest-token) "
              "SYNCFABRIC_CA=/etc/syncfabric/ca.pem "
              "/opt/syncfabric/venv/bin/python -m syncfabric.hosts.jobs.job_worker "
              "--controller https://CONTROLLER:8080 --job JOB --name HOST --rounds 5")
RELEASE = CURL + ' -H "X-Release-Key: KEY" -X DELETE https://CONTROLLER:8080/jobs/JOB'
RUN = (CONF_FOLDER, TOKEN, CA, CONTROLLER_REQUEST, CONTROLLER_NAME, CONTROLLER_CERT, CONTROLLER,
       BRIDGE, PORT, OFFLOADS, DESCRIPTION, MULTICAST_ROUTE, RECEIVE_BUFFERS, DAEMON_TOKEN,
       DAEMON, JOB, SMOKE_TEST, RELEASE)

INSTALLED = ("the checkout's virtual environment has every role installed; "
             "tests/integration/test_install.py installs each into an empty one")
TLS_TESTED = ("OpenFlow over TLS changes Open vSwitch's settings for every bridge of the "
              "machine; tests/integration/test_rest_access.py runs it with four bridges")
HOOK_TESTED = ("the DDP hook in a training script, launched by torchrun on 8 machines; "
               "tests/integration/test_jobs.py runs the hook in DDP ranks on one")
# the guide's commands that deploy_check does not run, and why
# the borrowed class's queues on a real switch's port: what the emulated fabric builds on
# every port (mininet_topos/traffic_classes.py), which tests/unit/test_traffic_classes.py
# holds equal to these lines
CLASSES_EMULATED = "the emulated fabric builds these classes (tests/integration/test_multicast.py)"
NOT_RUN = {
    "git clone https://github.com/syncfabric/syncfabric && cd syncfabric":
        "it runs from this checkout",
    "python3 -m venv /opt/syncfabric/venv": INSTALLED,
    "/opt/syncfabric/venv/bin/pip install '.[controller]'": INSTALLED,
    "/opt/syncfabric/venv/bin/pip install .": INSTALLED,
    "/opt/syncfabric/venv/bin/pip install '.[torch]'": INSTALLED,
    "ryu-manager --ofp-listen-host CONTROLLER --ofp-ssl-listen-port 6653 "
    "--ctl-privkey /etc/syncfabric/controller.key --ctl-cert /etc/syncfabric/controller.pem "
    "--ca-certs /etc/syncfabric/ca.pem ...": TLS_TESTED,
    "ovs-vsctl set-ssl /etc/openvswitch/switch.key /etc/openvswitch/switch.pem "
    "/etc/syncfabric/ca.pem": TLS_TESTED,
    "ovs-vsctl set-controller BRIDGE ssl:CONTROLLER:6653": TLS_TESTED,
    "GLOO_SOCKET_IFNAME=IFACE SYNCFABRIC_REST_TOKEN=... SYNCFABRIC_CA=/etc/syncfabric/ca.pem "
    "torchrun --nnodes 8 --nproc-per-node 1 --rdzv-endpoint HOST0:29500 train.py": HOOK_TESTED,
    "from syncfabric.torch.hook import fabric_hook": HOOK_TESTED,
    'fabric_hook(model, "https://CONTROLLER:8080", fallback=True)': HOOK_TESTED,
    **{command: CLASSES_EMULATED for command in (
        "tc qdisc del dev PORT root",
        "tc qdisc add dev PORT root handle 5: htb default 10",
        "tc class add dev PORT parent 5: classid 5:1 htb rate LINK burst 15k",
        "tc class add dev PORT parent 5:1 classid 5:10 htb rate LINK ceil LINK prio 0 quantum 10000",
        "tc class add dev PORT parent 5:1 classid 5:20 htb rate 8kbit ceil LINK prio 1 quantum 10000",
        "tc qdisc add dev PORT parent 5:20 handle 20: pfifo_head_drop limit 64",
        "tc filter add dev PORT parent 5: protocol ip prio 1 u32 match ip dsfield 0x04 0xfc "
        "flowid 5:20")},
}
# what stands for the guide's paths on one machine: {guide's path: name of the stand-in}
PATHS = ("/etc/syncfabric", "/var/lib/syncfabric", "/opt/syncfabric/venv")


def guide_commands(text):
    """The commands of a guide's code blocks (indented four spaces), one per line with
    backslash continuations joined and comments dropped; a block that opens with `{`
    (a JSON example) is not a command."""
    commands, block = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("    ") or (block and not line.strip()):
            block.append(line)
            continue
        commands += block_commands(block)
        block = []
    return commands


def block_commands(block):
    lines = [line.strip() for line in block if line.strip()]
    if not lines or lines[0].startswith("{"):
        return []
    commands, current = [], ""
    for line in lines:
        if line.startswith("#"):
            continue
        current += line[:-1].rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            commands.append(current)
            current = ""
    return commands


def unit_service(text):
    """(environment, command line) of a systemd unit's [Service]: its Environment=
    settings in order, its EnvironmentFile= paths (prefixed "file:"), and its
    ExecStart= with ${NAME} left for the caller to fill in."""
    environment, command = [], None
    for line in text.splitlines():
        key, _equals, value = line.partition("=")
        if key == "Environment":
            environment.append(tuple(value.split("=", 1)))
        elif key == "EnvironmentFile":
            environment.append(("file:", value.lstrip("-")))
        elif key == "ExecStart":
            command = value
    return environment, command


def unit_command_line(text):
    """The unit's ExecStart with its own Environment= settings filled in."""
    environment, command = unit_service(text)
    settings = {name: value for name, value in environment if name != "file:"}
    return re.sub(r"\$\{(\w+)\}", lambda found: settings[found.group(1)], command)


def filled(command, words, paths):
    """The command with the guide's capital words (whole words only) and paths replaced by
    what stands for them here; values are quoted for the shell."""
    for path, stand_in in paths.items():
        command = command.replace(path, stand_in)
    for word in sorted(words, key=len, reverse=True):
        command = re.sub(r"\b%s\b" % word, lambda _found: shlex.quote(str(words[word])), command)
    return command
