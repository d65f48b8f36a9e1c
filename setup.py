"""The package is described in setup.cfg; this file adds the native data path, a C
extension (syncfabric/hosts/datapath/_native.c) built by the ordinary `pip install`
where a C compiler and Python's headers are. Without them the install goes on, and
the hosts run the Python data path (syncfabric.hosts.datapath says so once)."""

import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NATIVE = Extension("syncfabric.hosts.datapath._native",
                   sources=["syncfabric/hosts/datapath/_native.c"],
                   extra_compile_args=["-O3", "-std=gnu11", "-Wall", "-Wno-unused-label"])


class OptionalBuildExt(build_ext):
    """build_ext that reports a failed build instead of failing the install."""

    def run(self):
        try:
            super().run()
        except Exception as error:   # no compiler at all: distutils' errors, or OSError
            self._skipped(error)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as error:
            self._skipped(error)

    @staticmethod
    def _skipped(error):
        print("warning: the native data path was not built (%s); the hosts will run the "
              "Python data path. Install gcc and the Python headers (Debian: build-essential "
              "python3-dev) and reinstall to build it." % error, file=sys.stderr)


setup(ext_modules=[NATIVE], cmdclass={"build_ext": OptionalBuildExt})
