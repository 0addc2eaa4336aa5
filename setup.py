"""The native extensions: the line scanner (src/runcompare/sources/textlog/_scan.c), the JSON
column reader (src/runcompare/sources/codecs/_jsoncols.c) and the protobuf walker and TFRecord
framer (src/runcompare/sources/codecs/_wire.c); the rest is in pyproject.toml.

The extensions are optional: where no C compiler is found the build goes on without them and
runcompare reads text logs with its polars parsers, trainer_state.json with json.loads and
event files with numpy alone (slower, the same results).
"""

from setuptools import Extension, setup

#: The number rounding that the line scanner and the JSON reader include.
DECIMAL = ["src/runcompare/sources/codecs/_decimal.h"]

setup(ext_modules=[Extension(name, [source], depends=depends, optional=True)
                   for name, source, depends in (
    ("runcompare.sources.textlog._scan", "src/runcompare/sources/textlog/_scan.c", DECIMAL),
    ("runcompare.sources.codecs._jsoncols", "src/runcompare/sources/codecs/_jsoncols.c", DECIMAL),
    ("runcompare.sources.codecs._wire", "src/runcompare/sources/codecs/_wire.c", []),
)])
