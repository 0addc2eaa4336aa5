"""Fill the OS page cache before a timing: every file under the given folders, and the shared
libraries of the interpreter's packages (polars' alone is 170 MB); and compile runcompare's
modules to bytecode, as ``pip install`` leaves an installed package (an editable install
where ``PYTHONDONTWRITEBYTECODE`` is set, as on the reference machine, would otherwise compile
every module changed since its bytecode in each fresh process: 0.1-0.3 s that no user of an
installed runcompare pays, and no peer installed by pip pays).

The reference machine's kernel reclaims idle pages on its own (DAMON), so after a pause a
process pays for disk reads of whatever was evicted: its own library code and the logs. That
lands on whichever contender runs first, at random. Each benchmark calls :func:`fill` before
every timed run, so every contender starts with the logs and the libraries in memory, as
right after a training run has written them.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import sysconfig
from pathlib import Path

_CHUNK = 1 << 22


def fill(*folders: Path) -> None:
    """Read every file under ``folders`` and every shared library under site-packages;
    runcompare's modules compiled where their bytecode is missing or older."""
    spec = importlib.util.find_spec("runcompare")
    for where in (spec.submodule_search_locations or []) if spec else []:
        compileall.compile_dir(where, quiet=2)
    packages = Path(sysconfig.get_paths()["purelib"])
    files = [p for folder in folders for p in Path(folder).rglob("*") if p.is_file()]
    files += [p for p in packages.rglob("*.so*") if p.is_file()]
    buffer = bytearray(_CHUNK)
    for file in files:
        try:
            with open(file, "rb", buffering=0) as handle:
                while handle.readinto(buffer):
                    pass
        except OSError:
            continue
    os.sync()
