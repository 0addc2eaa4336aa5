"""The native extensions: the line scanner (src/runcompare/sources/textlog/_scan.c) and the JSON
column reader (src/runcompare/sources/codecs/_jsoncols.c); the rest is in pyproject.toml.

The extensions are optional: where no C compiler is found the build goes on without them and
runcompare reads text logs with its polars parsers and trainer_state.json with json.loads
alone (slower, the same results).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("runcompare.sources.textlog._scan",
                             ["src/runcompare/sources/textlog/_scan.c"],
                             optional=True),
                   Extension("runcompare.sources.codecs._jsoncols",
                             ["src/runcompare/sources/codecs/_jsoncols.c"],
                             optional=True)])
