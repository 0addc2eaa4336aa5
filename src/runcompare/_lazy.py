"""Names a package exports, imported on first use (PEP 562), so ``import runcompare``,
``runcompare --help``, ``--version`` and ``runcompare batch`` load no polars, pyarrow, pandas,
plotly or tensorboard (``tests/test_startup.py`` holds the rule). A package writes its names
twice: under ``TYPE_CHECKING`` for type checkers, and in the mapping given here."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["exports"]


def exports(package: str, names: Mapping[str, str]) -> tuple[Callable[[str], Any],
                                                           Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: ``names`` maps each exported name to
    the module (relative to ``package``) that defines it under the same name."""

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *names})

    return __getattr__, __dir__
