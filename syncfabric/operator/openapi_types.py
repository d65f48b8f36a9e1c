"""The building blocks of the REST contract's schemas: references, objects, arrays and the
plain types every schema module (openapi_schemas.py, openapi_job_schemas.py) shares."""

from syncfabric.decisions.fabric_view import MAX_PORT

OPENAPI_VERSION = "3.0.3"
MAX_DPID = 2 ** 64 - 1


def ref(name):
    return {"$ref": "#/components/schemas/%s" % name}


def obj(properties, required=(), additional=True, example=None):
    schema = {"type": "object", "properties": properties}
    if example is not None:
        schema["example"] = example
    if required:
        schema["required"] = list(required)
    if not additional:
        schema["additionalProperties"] = False
    return schema


def array(items, **limits):
    return dict({"type": "array", "items": items}, **limits)


def nullable(schema):
    return dict(schema, nullable=True)


def described(schema, text):
    return dict(schema, description=text)


def mapping(values, text=None):
    """An object whose every property holds `values` (keyed by host, worker, ...)."""
    schema = {"type": "object", "additionalProperties": values}
    return schema if text is None else described(schema, text)


def one_of(text, *schemas):
    return {"oneOf": list(schemas), "description": text}


def choice(values, **more):
    return dict({"type": "string", "enum": list(values)}, **more)


STRING = {"type": "string"}
BOOLEAN = {"type": "boolean"}
NAME = {"type": "string", "description": "a host or switch name of the fabric description"}
NUMBER = {"type": "number"}
POSITIVE = {"type": "number", "exclusiveMinimum": True, "minimum": 0}
INTEGER = {"type": "integer"}
NON_NEGATIVE_INTEGER = {"type": "integer", "minimum": 0}
IPV4 = {"type": "string", "format": "ipv4"}
PORT = {"type": "integer", "minimum": 1, "maximum": MAX_PORT}
NAMES = array(NAME, uniqueItems=True)
PATH = array(NAME)
TTL = nullable(described(POSITIVE, "lease in seconds; null or absent: no lease"))
RATIO_MAP = mapping(NUMBER)
