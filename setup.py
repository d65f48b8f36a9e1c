"""The package is described in setup.cfg; this file adds the native data path, a C
extension (syncfabric/hosts/datapath/_native.c and its parts) built by the ordinary
`pip install` where a C compiler and Python's headers are, hardened (stack protector,
fortified string functions, read-only relocations). Without them the install goes on,
and the hosts run the Python data path (syncfabric.hosts.datapath says so once). It
reads the wire's little-endian float32s where they lie, so a big-endian host is left
without it and runs the Python path too.

SYNCFABRIC_NATIVE=required (make setup sets it where gcc is) makes a build that fails,
or warns, fail the install: the suite never runs on a fallback it did not ask for.
SYNCFABRIC_NATIVE_CFLAGS adds compiler and linker flags (make fuzz's sanitizers)."""

import glob
import os
import shlex
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

DATAPATH = "syncfabric/hosts/datapath"
REQUIRED = os.environ.get("SYNCFABRIC_NATIVE") == "required"
EXTRA_FLAGS = shlex.split(os.environ.get("SYNCFABRIC_NATIVE_CFLAGS", ""))
COMPILE_FLAGS = ["-O3", "-std=gnu11", "-Wall", "-Wextra", "-fstack-protector-strong",
                 "-D_FORTIFY_SOURCE=2"] + (["-Werror"] if REQUIRED else []) + EXTRA_FLAGS
LINK_FLAGS = ["-Wl,-z,relro,-z,now"] + EXTRA_FLAGS

NATIVE = Extension("syncfabric.hosts.datapath._native",
                   sources=sorted(glob.glob(DATAPATH + "/*.c")),
                   depends=glob.glob(DATAPATH + "/*.h"),
                   extra_compile_args=COMPILE_FLAGS, extra_link_args=LINK_FLAGS)


class OptionalBuildExt(build_ext):
    """build_ext that reports a failed build instead of failing the install, unless
    SYNCFABRIC_NATIVE=required; flags the compiler does not take are left out."""

    def run(self):
        try:
            super().run()
        except Exception as error:   # no compiler at all: distutils' errors, or OSError
            self._skipped(error)

    def build_extension(self, ext):
        ext.extra_compile_args = [f for f in ext.extra_compile_args if self._takes(f)]
        try:
            super().build_extension(ext)
        except Exception as error:   # no compiler, no headers, or the code does not build
            self._skipped(error)

    @staticmethod
    def _skipped(error):
        if REQUIRED:
            raise error
        print("warning: the native data path was not built (%s); the hosts will run the "
              "Python data path. Install gcc and the Python headers (Debian: build-essential "
              "python3-dev) and reinstall to build it." % error, file=sys.stderr)

    def _takes(self, flag):
        """Whether the compiler accepts `flag` (a compiler without one still builds)."""
        if flag in EXTRA_FLAGS or not flag.startswith(("-f", "-W")) or flag == "-Werror":
            return True
        probe = os.path.join(self.build_temp, "flag_probe.c")
        os.makedirs(self.build_temp, exist_ok=True)
        with open(probe, "w") as source:
            source.write("int main(void) { return 0; }\n")
        try:
            self.compiler.compile([probe], output_dir=self.build_temp, extra_postargs=[flag])
        except Exception:
            return False
        return True


setup(ext_modules=[NATIVE] if sys.byteorder == "little" else [],
      cmdclass={"build_ext": OptionalBuildExt})
