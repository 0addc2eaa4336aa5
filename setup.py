"""The native line scanner (src/runcompare/sources/textlog/_scan.c) and protobuf walker
(src/runcompare/sources/codecs/_wire.c); the rest is in pyproject.toml.

The extensions are optional: where no C compiler is found the build goes on without them and
runcompare reads text logs with its polars parsers and event files with numpy alone (slower,
the same results).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("runcompare.sources.textlog._scan",
                             ["src/runcompare/sources/textlog/_scan.c"],
                             optional=True),
                   Extension("runcompare.sources.codecs._wire",
                             ["src/runcompare/sources/codecs/_wire.c"],
                             optional=True)])
