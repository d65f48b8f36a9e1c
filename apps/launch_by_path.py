"""Both launch forms of our Ryu apps run the same apps.

`ryu-manager apps.multicast_controller` imports the module by name; the form
every Ryu tutorial uses, `ryu-manager apps/multicast_controller.py`, loads the
file again as a module named `multicast_controller`, beside
`apps.multicast_controller`. Its classes are copies: a second fabric app
whose EventFabricChanged no other app listens to, and a second app under the
same name. So each controller file, when loaded by path, calls stand_in():
the copy keeps no app of its own, only a stand-in that requires the real
module, and ryu-manager loads every real app once, whatever the form.
"""

from ryu.base.app_manager import RyuApp


def stand_in(namespace):
    """Make the module `namespace` (loaded by path) a stand-in for apps.<its name>."""
    module = namespace["__name__"]
    for name, value in list(namespace.items()):
        if isinstance(value, type) and issubclass(value, RyuApp) and value.__module__ == module:
            del namespace[name]
    real = "apps." + module.rsplit(".", 1)[-1]
    name = "LoadedByPath_" + module.replace(".", "_")
    namespace["_REQUIRED_APP"] = [real]   # ryu reads it from the module
    namespace[name] = type(name, (RyuApp,), {"__module__": module,
                                             "__doc__": "Loads %s (launched by path)." % real})
