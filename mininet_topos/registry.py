"""Every fabric an emulated experiment can build, by name, in Mininet's own --topo syntax
(mininet.util.splitArgs: a name, then positional and key=value arguments):

    spineleaf,spines=8,leaves=8,hosts_per_leaf=2   SpineLeafTopo (spineleaf.py)
    fattree,4          fattree,k=4,hosts_per_edge=1   FatTreeTopo (fattree.py)
    grid_example                                    GRID's worked example (grid_example.py)
    inart_example                                   InArt's worked example (inart_example.py)
    mypackage.fabrics:campus,3                      a user's own Topo class or function

An experiment adds what it needs (its link rate, its aggregators: "top" and "tor" name a
fabric's top tier and top-of-rack tier in any fabric) where the fabric takes it; what the
--topo text gives wins, and a worked example keeps its paper's rates. A new fabric goes
in TOPOS, or stays in the user's own package.
"""

import importlib
import inspect
from dataclasses import dataclass, field

from mininet.topo import Topo
from mininet.util import splitArgs

from mininet_topos.fattree import FatTreeTopo
from mininet_topos.grid_example import GridExampleTopo
from mininet_topos.inart_example import InartExampleTopo
from mininet_topos.spineleaf import SpineLeafTopo

TOPOS = {"spineleaf": SpineLeafTopo, "fattree": FatTreeTopo, "grid_example": GridExampleTopo,
         "inart_example": InartExampleTopo}


@dataclass(frozen=True)
class TopoSpec:
    """A parsed --topo: the fabric's name, its positional and its key=value arguments."""
    name: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def __str__(self):
        return ",".join([self.name, *map(str, self.args),
                         *("%s=%s" % item for item in self.kwargs.items())])


def parse_topo(text):
    """A TopoSpec from --topo's text; ValueError naming the fabrics there are if the name
    is neither one of TOPOS nor a package.module:factory that imports."""
    name, args, kwargs = splitArgs(text)
    spec = TopoSpec(name, tuple(args), kwargs)
    factory_of(spec)
    return spec


def factory_of(spec):
    """The Topo class or function that builds `spec`."""
    if spec.name in TOPOS:
        return TOPOS[spec.name]
    module, _, attribute = spec.name.partition(":")
    if not attribute:
        raise ValueError("no fabric named %r: give one of %s, or package.module:factory"
                         % (spec.name, ", ".join(sorted(TOPOS))))
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError("cannot load the fabric %s: %s" % (spec.name, error)) from None


def accepted(factory):
    """The keyword arguments `factory` takes (a Topo class: those of its build), or None
    if it takes any."""
    function = factory.build if inspect.isclass(factory) and issubclass(factory, Topo) \
        else factory
    parameters = inspect.signature(function).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return {p.name for p in parameters}


def build_topo(spec, **options):
    """The Topo of `spec`, given each of `options` (e.g. bw=20, aggregators="top") that it
    takes and the --topo text does not set; ValueError if the arguments do not fit."""
    factory = factory_of(spec)
    takes = accepted(factory)
    given = {key: value for key, value in options.items()
             if (takes is None or key in takes) and key not in spec.kwargs}
    try:
        return factory(*spec.args, **given, **spec.kwargs)
    except TypeError as error:
        raise ValueError("--topo %s: %s" % (spec, error)) from None


def fabric_hosts(topo):
    """The hosts that can run workers (not aggregators), h1, h2, ... in number order."""
    hosts = [h for h in topo.hosts() if topo.nodeInfo(h).get("role", "host") == "host"]
    return sorted(hosts, key=lambda name: (len(name), name))
