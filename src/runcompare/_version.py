"""The installed version of runcompare (``runcompare --version``, ``rc.__version__``)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("runcompare")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0+unknown"
