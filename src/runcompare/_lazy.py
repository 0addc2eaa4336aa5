"""Names a package exports, imported on first use, so ``import runcompare``,
``runcompare --help``, ``--version`` and ``runcompare batch`` load no polars, pyarrow, pandas,
plotly or tensorboard (``tests/test_startup.py`` holds the rule). A package writes its names
twice: under ``TYPE_CHECKING`` for type checkers, and in the mapping given to :func:`install`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from types import ModuleType
from typing import Any

__all__ = ["install"]


class _Package(ModuleType):
    """A package whose exported names are looked up in their modules on first use, and stay
    the exported objects: importing the submodule ``runcompare.load`` does not replace the
    function ``runcompare.load`` (the import system sets a package attribute per submodule)."""

    _exports: Mapping[str, str]

    def __getattr__(self, name: str) -> Any:
        module = self._exports.get(name)
        if module is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, self.__name__), name)
        ModuleType.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._exports and isinstance(value, ModuleType):
            return  # the submodule of an exported function's name: keep the function
        ModuleType.__setattr__(self, name, value)

    def __dir__(self) -> list[str]:
        return sorted({*vars(self), *self._exports})


def install(package: str, names: Mapping[str, str]) -> None:
    """Make ``package`` a :class:`_Package`: ``names`` maps each exported name to the module
    (relative to ``package``) that defines it under the same name."""
    module = sys.modules[package]
    ModuleType.__setattr__(module, "_exports", dict(names))
    module.__class__ = _Package
