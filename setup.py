"""The native line scanner (src/runcompare/sources/textlog/_scan.c); the rest is in pyproject.toml.

The extension is optional: where no C compiler is found the build goes on without it and
runcompare reads text logs with its polars parsers alone (slower, the same results).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("runcompare.sources.textlog._scan",
                             ["src/runcompare/sources/textlog/_scan.c"],
                             optional=True)])
