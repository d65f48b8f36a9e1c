"""What the controller remembers across a restart: one JSON file per service in a state
directory, so that a killed and restarted controller carries on where it stopped.

The files hold release keys: the directory is created private (0700), each file 0600,
and each is replaced whole (write, then rename), so a kill never leaves half a file.
Without a directory the controller remembers nothing (a restart releases everything).
"""

import json
import logging
import os
import tempfile
from pathlib import Path

STATE_DIR_ENV = "SYNCFABRIC_STATE_DIR"
LOG = logging.getLogger(__name__)


class StateFiles:
    """load(name) and save(name, data), in `directory` (None: remember nothing)."""

    def __init__(self, directory):
        self.directory = Path(directory) if directory else None

    def load(self, name):
        """The data last saved under `name`, or None (no state directory, nothing saved, or
        a file that is not JSON: then it is logged and ignored)."""
        path = self.directory / ("%s.json" % name) if self.directory else None
        if path is None or not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError) as error:
            LOG.error("ignoring state file %s: %s", path, error)
            return None

    def save(self, name, data):
        """Replace what is saved under `name` (nothing happens without a state directory).
        A failure is logged, not raised: the controller goes on, it only forgets on a
        restart."""
        directory = self.directory
        if directory is None:
            return
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=directory, prefix=".%s." % name)
            # compact: json.dumps without indent is the C encoder, 8x faster than an
            # indented dump, and a job's set-up saves three of these
            with os.fdopen(handle, "w") as file:   # mkstemp makes it 0600
                file.write(json.dumps(data, sort_keys=True))
            os.replace(temporary, directory / ("%s.json" % name))
        except OSError as error:
            LOG.error("could not save %s in %s: %s", name, directory, error)
