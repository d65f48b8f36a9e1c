"""The control datagrams of a job's hosts: "SFJC" and a JSON object (a hello and its
"ready", a repair request and its answer). Any process can send one, so every field is
read as hostile: a round must be a whole number, fragment ranges and [fragment, mask]
pairs are taken only where they are whole numbers within the job, and what a request
names is never expanded beyond the fragments the node holds."""

import json
import math

CONTROL_MAGIC = b"SFJC"


def control_packet(message):
    return CONTROL_MAGIC + json.dumps(message, separators=(",", ":")).encode()


def control_message(packet):
    """The control message a datagram carries, or None if it carries a fragment ({} for
    one that is not a JSON object)."""
    if not packet.startswith(CONTROL_MAGIC):
        return None
    try:
        message = json.loads(packet[len(CONTROL_MAGIC):])
    except (ValueError, RecursionError):
        return {}
    return message if isinstance(message, dict) else {}


def whole(value):
    """Whether a JSON value is a whole number (true and false are not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def finite(value):
    """Whether a JSON value is a finite number (true and false, NaN and infinities are
    not: Python's json reads NaN and Infinity)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def pairs(value):
    """The [a, b] pairs of whole numbers in a JSON list (anything else left out)."""
    if not isinstance(value, list):
        return []
    return [(item[0], item[1]) for item in value
            if isinstance(item, list) and len(item) == 2 and whole(item[0]) and whole(item[1])]


def needed_fragments(need, first, last):
    """The fragments in first..last-1 that a repair request's `need` ([[first, last
    exclusive], ...]) names, each once, in order."""
    named = set()
    for start, stop in pairs(need):
        named.update(range(max(start, first), min(stop, last)))
    return sorted(named)


def missing_pairs(missing, count):
    """The [fragment, mask of workers] pairs of an answer's `missing` whose fragment is
    one of the job's `count` (and whose mask is not negative)."""
    return [[index, mask] for index, mask in pairs(missing) if 0 <= index < count and mask >= 0]
