"""What the controller remembers across a restart: one JSON file per app in a state
directory, so that a killed and restarted controller carries on where it stopped.

The directory is SYNCFABRIC_STATE_DIR in ryu-manager's environment, or
`state_dir = ...` in a ryu-manager --config-file; without one the controller
remembers nothing (and a restart releases everything). The files hold release
keys: the directory is created private (0700), each file 0600, and each is
replaced whole (write, then rename), so a kill never leaves half a file.
"""

import json
import logging
import os
import tempfile
from pathlib import Path

from ryu import cfg

STATE_DIR_ENV = "SYNCFABRIC_STATE_DIR"
if "state_dir" not in cfg.CONF:
    cfg.CONF.register_opt(cfg.StrOpt("state_dir", default=None,
                                     help="directory where the apps keep what survives a restart"))
LOG = logging.getLogger(__name__)


def state_dir():
    directory = os.environ.get(STATE_DIR_ENV) or cfg.CONF.state_dir
    return Path(directory) if directory else None


def load(name):
    """The data last saved under `name`, or None (no state directory, nothing saved, or a
    file that is not JSON: then it is logged and ignored)."""
    directory = state_dir()
    path = directory / ("%s.json" % name) if directory else None
    if path is None or not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as error:
        LOG.error("ignoring state file %s: %s", path, error)
        return None


def save(name, data):
    """Replace what is saved under `name` (nothing happens without a state directory). A
    failure is logged, not raised: the controller goes on, it only forgets on a restart."""
    directory = state_dir()
    if directory is None:
        return
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".%s." % name)
        with os.fdopen(handle, "w") as file:   # mkstemp makes it 0600
            json.dump(data, file, indent=1, sort_keys=True)
        os.replace(temporary, directory / ("%s.json" % name))
    except OSError as error:
        LOG.error("could not save %s in %s: %s", name, directory, error)
