"""trainer_state.json read natively: ``log_history`` straight into columns, for :mod:`.hf_trainer`.

``json.loads`` of a whole trainer_state.json and a Python loop over its ``log_history`` dicts
cost ~15 ms for 2,000 entries; ``codecs/_jsoncols.c`` reads the document once in C (the GIL
released) and gives the numbers of the entries as columns (key, value, step), each entry's
byte span, and the last entry holding both end-of-training rates. The other top-level fields
(a few small values) are read by ``json.loads`` of the document with ``log_history`` cut out.

The reader accepts only documents it reads exactly as ``json.loads`` does; anything else (not
JSON, not UTF-8, an entry that is not a dict with an integer step, duplicate or escaped keys,
very large integers, deep nesting: the list is in ``_jsoncols.c``) gives None and
:mod:`.hf_trainer` reads the file as it always did, so results, findings and messages are
the same either way. A test runs every real trainer_state.json, and damaged and edited copies
of them, through both paths (``RUNCOMPARE_PURE=1`` turns the reader off).

The extension is built by ``pip install`` (setup.py marks it optional): without a C compiler
runcompare reads trainer_state.json with ``json.loads`` alone, slower.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    from ..codecs import _jsoncols  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler: json.loads reads every state
    _jsoncols = None

__all__ = ["NATIVE", "Columns", "entries", "is_start", "marked", "parse"]

#: Whether the native reader is used (built, and not turned off with ``RUNCOMPARE_PURE=1``).
NATIVE = _jsoncols is not None and os.environ.get("RUNCOMPARE_PURE", "") in ("", "0")
#: Below this recursion limit ``json.loads`` may refuse a nesting the native reader follows
#: (it follows 64 levels): the Python path decides.
_MIN_RECURSION = 200


@dataclass(frozen=True, eq=False)
class Columns:
    """A log history read natively: ``keys`` (the keys holding numbers, in the order of their
    first number), per number its ``key`` (index into ``keys``), ``value`` and ``step``; per
    entry its byte span in ``data``; ``last_marked``: the last entry whose marked keys all
    hold numbers (-1 if none)."""

    data: bytes
    keys: list[str]
    key: np.ndarray
    value: np.ndarray
    step: np.ndarray
    spans: np.ndarray
    last_marked: int

    def __len__(self) -> int:
        return len(self.spans)

    def text(self, count: int) -> bytes:
        """The bytes of the first ``count`` entries (> 0) and the separators between them."""
        return self.data[self.spans[0, 0]:self.spans[count - 1, 1]]


def parse(data: bytes, array: str, index: str,
          marks: tuple[str, ...]) -> tuple[dict[str, Any], Columns] | None:
    """The top-level fields of the JSON document ``data`` other than ``array``, and the list
    ``array`` as :class:`Columns` (``index``: each entry's integer step; ``marks``: the keys
    :attr:`Columns.last_marked` looks for); None when the native reader is off or not sure."""
    if not NATIVE or sys.getrecursionlimit() < _MIN_RECURSION:
        return None
    assert _jsoncols is not None
    found = _jsoncols.columns(data, array.encode(), index.encode(),
                              tuple(mark.encode() for mark in marks))
    if found is None:
        return None
    start, end, keys, key, value, step, spans, last_marked = found
    try:  # the rest of the document (checked by the reader already): a few small fields
        fields = json.loads((data[:start] + b"[]" + data[end:]).decode())
    except (ValueError, RecursionError):
        return None
    del fields[array]
    return fields, Columns(data, keys, np.frombuffer(key, np.int32),
                           np.frombuffer(value, np.float64), np.frombuffer(step, np.int64),
                           np.frombuffer(spans, np.int64).reshape(-1, 2), last_marked)


def entries(history: list[Any] | Columns) -> list[Any]:
    """The entries as ``json.loads`` gives them."""
    if not isinstance(history, Columns):
        return history
    if not len(history):
        return []
    return json.loads(b"[" + history.text(len(history)) + b"]")  # type: ignore[no-any-return]


def marked(history: Columns) -> dict[str, Any] | None:
    """The entry :attr:`Columns.last_marked` names, as ``json.loads`` gives it."""
    if history.last_marked < 0:
        return None
    start, end = history.spans[history.last_marked]
    return json.loads(history.data[start:end])  # type: ignore[no-any-return]


def is_start(prefix: list[Any] | Columns, history: list[Any] | Columns) -> bool:
    """Whether ``prefix``'s entries equal the first entries of ``history`` (as lists of the
    dicts ``json.loads`` gives: ``1 == 1.0``, key order aside). Two native histories whose
    entries are the same bytes are equal without reading them again."""
    if isinstance(prefix, Columns) and isinstance(history, Columns):
        count = len(prefix)
        if count > len(history):
            return False
        if count == 0 or prefix.text(count) == history.text(count):
            return True
    first = entries(prefix)
    return first == entries(history)[:len(first)]
