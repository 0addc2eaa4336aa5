"""The lines of a log that repeat one layout, read by a native scanner.

A long log is mostly one line printed again and again with other numbers in it (Megatron's
``iteration N/ M | key: value | ...``, nanoGPT's ``iter N: loss X, ...``, the Trainer's dicts
after their progress bars). A
source describes that line once per chunk, from a sample line of the chunk, as a
:class:`Layout`: a small program of :data:`Piece`\\ s (literal text, spaces, a number, a
timestamp, a skip to a literal) and, for each number, the column it fills. The scanner in
``_scan.c`` walks every line of the chunk once in C (the GIL released): a line the program
consumes from start to end gives its numbers, any other line is handed back, whole, to the
source's polars parser, which reads every line the same way it always did. So the scanner is
only an accelerator for the common layout, and it is held to give what that parser gives:
:func:`checked` makes a layout only when the scanner's row for the sample line equals the
parser's row for it, and the tests run every real Megatron, nanoGPT and HF stdout log
through both paths (``RUNCOMPARE_PURE=1`` turns the scanner off). One difference: the bytes a program skips
(the progress-bar redraws between a dict line's first bar and its dict) are not checked to be
UTF-8, so a line whose only bad bytes lie there is read, not counted in the ``not-utf8``
finding.

The scanner is a C extension built by ``pip install`` (setup.py marks it optional): without a
C compiler runcompare installs without it and reads the same logs, slower.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

try:
    from . import _scan  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler: the polars parsers read every line
    _scan = None

__all__ = ["MAX_LAYOUTS", "NATIVE", "SLOTS", "Layout", "Piece", "checked", "first", "pieces",
           "scan"]

#: Whether the native scanner is used (built, and not turned off with ``RUNCOMPARE_PURE=1``).
NATIVE = _scan is not None and os.environ.get("RUNCOMPARE_PURE", "") in ("", "0")

#: (kind, text): ``lit`` (``text``), ``ws`` (a run of one or more spaces), ``num`` (a
#: number: a slot), ``int`` (a step or a count, digits with no sign: a slot), ``ts``
#: (``YYYY-MM-DD HH:MM:SS[.f]``: a slot), ``pos`` (a slot: the byte offset reached in the
#: line), ``skipto`` (everything up to and including the first ``text``), ``upto``
#: (everything before it), ``not`` (``text`` is nowhere in the rest of the line), ``apart``
#: (the last byte before here but spaces is none of ``text``'s, nor past ASCII), ``end``
#: (trailing spaces, the end of the line).
Piece = tuple[str, str]
_OPS = {"lit": 1, "ws": 2, "num": 3, "ts": 4, "skipto": 5, "end": 6, "int": 7, "pos": 8,
        "not": 9, "upto": 10, "apart": 11}
#: Layouts tried per chunk (by the scanner, and by the polars field splitter) before the general
#: path reads the rest.
MAX_LAYOUTS = 4
#: The kinds of piece that give a number.
SLOTS = ("num", "int", "ts", "pos")
_TOKEN = re.compile(r"(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,6})?(?!\d))"
                    r"|(?P<num>(?<![\w.-])-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|(?P<ws> +)")


def pieces(text: str) -> list[Piece]:
    """``text`` as literals, numbers, timestamps and the runs of spaces around them (no
    ``end``); spaces between words stay in the literal.

    A number starts after a character that is not a letter, digit, ``_``, ``.`` or ``-``
    (the ``1`` of ``mtp_1`` is text), so what the scanner reads there is what a parser that
    splits the line at its punctuation reads.

    >>> pieces("[2024-03-01 09:00:08] iteration  10/ 500 | lm loss: 2.5E+00 |")
    ... # doctest: +NORMALIZE_WHITESPACE
    [('lit', '['), ('ts', '2024-03-01 09:00:08'), ('lit', '] iteration'), ('ws', '  '),
     ('num', '10'), ('lit', '/'), ('ws', ' '), ('num', '500'), ('ws', ' '),
     ('lit', '| lm loss:'), ('ws', ' '), ('num', '2.5E+00'), ('ws', ' '), ('lit', '|')]
    """
    out: list[Piece] = []
    at = 0
    for token in _TOKEN.finditer(text):
        if token.start() > at:
            out.append(("lit", text[at:token.start()]))
        out.append((token.lastgroup or "lit", token.group()))
        at = token.end()
    if at < len(text):
        out.append(("lit", text[at:]))
    merged: list[Piece] = []
    for index, (kind, part) in enumerate(out):
        near = [out[i][0] for i in (index - 1, index + 1) if 0 <= i < len(out)]
        if kind == "ws" and not set(near) & set(SLOTS) and 0 < index < len(out) - 1:
            kind = "lit"  # spaces between words
        if kind == "lit" and merged and merged[-1][0] == "lit":
            merged[-1] = ("lit", merged[-1][1] + part)
        else:
            merged.append((kind, part))
    return merged


@dataclass(frozen=True)
class Layout:
    """A compiled program and what its slots fill: ``columns`` (one per slot, None for a
    number that is only matched), then ``constants`` (the same on every matching line), the
    frame's columns in ``schema`` order."""

    program: bytes
    columns: tuple[str | None, ...]
    schema: dict[str, pl.DataType]
    constants: dict[str, Any]

    @property
    def slots(self) -> int:
        return len(self.columns)


def _compile(program: Sequence[Piece]) -> bytes:
    out = bytearray()
    for kind, text in program:
        out.append(_OPS[kind])
        if kind in ("lit", "skipto", "upto", "not", "apart"):
            data = text.encode()
            if not 0 < len(data) < 1 << 16:
                raise ValueError(f"a {kind} piece of {len(data)} bytes")
            out += struct.pack("<H", len(data)) + data
    return bytes(out)


def scan(data: bytes, layout: Layout) -> tuple[int, pl.DataFrame, bytes, np.ndarray]:
    """The lines of ``data`` that ``layout`` matches as rows (``line``: 0-based index in
    ``data``, then ``layout.schema``), the number of lines, and the other lines (bytes, each
    ending in a newline) with their indexes."""
    return _scan_rows(data, layout)


def _scan_rows(data: bytes, layout: Layout) -> tuple[int, pl.DataFrame, bytes, np.ndarray]:
    """:func:`scan`, also for :func:`checked`'s one sample line (so that what the readers
    scan, through :func:`scan`, can be counted apart)."""
    assert _scan is not None
    count, matched, values, rest, rest_lines = _scan.scan(data, layout.program, layout.slots)
    lines = np.frombuffer(matched, dtype=np.int64)
    numbers = np.frombuffer(values, dtype=np.float64).reshape(len(lines), layout.slots)
    columns = {"line": pl.Series("line", lines)}
    for index, name in enumerate(layout.columns):
        if name is not None:
            columns[name] = pl.Series(name, numbers[:, index]).cast(layout.schema[name])
    for name, value in layout.constants.items():
        columns[name] = pl.repeat(value, len(lines), dtype=layout.schema[name], eager=True) \
            .alias(name)
    rows = pl.DataFrame([columns[name] for name in ("line", *layout.schema)])
    return count, rows, rest, np.frombuffer(rest_lines, dtype=np.int64)


#: Layouts already checked, by program, columns and parser: a chunk's sample line nearly
#: always has the layout of the chunk before it.
_CHECKED: dict[tuple[bytes, tuple[str | None, ...], object], Layout] = {}


def checked(sample: str, program: Sequence[Piece], columns: Sequence[str | None],
            parse: Callable[[pl.DataFrame], pl.DataFrame]) -> Layout | None:
    """The layout of ``program`` (``end`` added) with ``columns`` for its slots, when the
    scanner's row for ``sample`` equals ``parse``'s (the source's own parser, given the
    sample as a one-line chunk) and the parser finds the sample whole (not ``bad``: the
    columns that are no slot are the sample's for every line); None otherwise, or when the
    scanner is off. A program that
    passed once is not checked again (``parse``, a module-level function, reads every line
    it matches the same way)."""
    if not NATIVE:
        return None
    program = [*program, ("end", "")]
    if sum(kind in SLOTS for kind, _ in program) != len(columns):
        return None
    key = (_compile(program), tuple(columns), parse)
    if key in _CHECKED:
        return _CHECKED[key]
    expected = parse(pl.DataFrame({"line": [0], "text": [sample]}))
    if expected.height != 1 or not {c for c in columns if c} <= set(expected.columns):
        return None
    if "bad" in expected.columns and expected.get_column("bad")[0]:
        return None  # every line the scanner took would be bad, with the sample's text
    schema = dict(expected.drop("line").schema)
    constants = {name: expected.get_column(name)[0] for name in schema if name not in columns}
    layout = Layout(key[0], key[1], schema, constants)
    _, rows, _, _ = _scan_rows(sample.encode() + b"\n", layout)
    if not rows.equals(expected.select("line", *schema), null_equal=True):
        return None
    if len(_CHECKED) > 256:
        _CHECKED.clear()
    _CHECKED[key] = layout
    return layout


#: Bytes at the start of a chunk that a sample line is looked for in.
SAMPLE_BYTES = 1 << 20


def first(data: bytes, needle: bytes, build: Callable[[str], Layout | None], *,
          tries: int = 64, builds: int = 8) -> Layout | None:
    """The layout that ``build`` makes of the first line of ``data`` (its first
    :data:`SAMPLE_BYTES`, any bytes-like object) that holds ``needle`` and that it makes one
    of: of the first ``tries`` such lines, ``builds`` at most that it was not quick to turn
    down. A line that is not UTF-8, holds a ``\\x1f`` (the CSV reader cuts a line there) or
    ends in ``\\r`` is never a sample."""
    if len(data) > SAMPLE_BYTES:
        data = bytes(data[:SAMPLE_BYTES])
        data = data[:data.rfind(b"\n") + 1]
    elif not isinstance(data, bytes):
        data = bytes(data)
    at = data.find(needle)
    for _ in range(tries):
        if at < 0 or builds <= 0:
            return None
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        line = data[start:end]
        if b"\x1f" not in line and not line.endswith(b"\r"):
            try:
                text = line.decode()
            except UnicodeDecodeError:
                text = None
            if text is not None:
                found = build(text)
                if found is not None:
                    return found
                builds -= 1
        at = data.find(needle, end)
    return None
