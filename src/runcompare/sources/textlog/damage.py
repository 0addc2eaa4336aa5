"""What is damaged in a text log, found and said: a last line cut off inside a number (the
file of a run killed while writing, or still running), and lines that looked like a format's
but did not parse.

A cut number is damage, not a point: :func:`cut_tail` finds it at a file's end (what
:func:`~.lines.read_lines` leaves unread), :func:`without_cut_row` takes it off a whole file's
bytes, and :func:`cut_finding` is the warning; :func:`unparsed_finding` says which lines did
not parse.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import polars as pl

from ...model import Finding

__all__ = ["PROBE", "cut_finding", "cut_tail", "tail_cut", "unparsed_finding",
           "without_cut_row"]

#: Bytes at the end of a file (or of a chunk's span) searched for its last newline before the
#: whole of it.
PROBE = 64 << 10


def cut_finding(path: Path, line: int, text: str) -> Finding:
    """The warning for a last line cut off inside a number (``text``), which was not read."""
    return Finding("warning", "damaged-input",
                   f"{path}: line {line} is cut off (the file ends inside a number, "
                   f"'{_snippet(text[-40:])}', as when a run is killed while writing or is "
                   "still running); dropped what was cut")


def without_cut_row(data: bytes) -> tuple[bytes, bytes]:
    """A whole file's ``data`` without its last line when the file ends inside a number (the
    row a writer was cut off in: its value is damage, not a point), and that line (``b""``
    when the file ends whole)."""
    tail, _ = tail_cut(data, whole=True)
    return (data[:-len(tail)] if tail else data), tail


#: How the end of a line cut off mid-number looks: a digit, a decimal point, a sign, the
#: ``e`` of an exponent after a digit, or a thousands separator after one (``lm loss: 8.`` of
#: 8.486469, ``lr 3.0`` of 3.00e-04, ``tps: 6,`` of 6,544).
_CUT = re.compile(rb"(?:[0-9.+-]|[0-9][eE,])\Z")


def cut_tail(handle: io.BufferedReader) -> tuple[bytes, bool]:
    """The bytes after the file's last newline or carriage return when the file ends inside a
    number (a line cut off while it was written: the value is damage, not a point), and
    whether they are a whole line (after a newline) rather than its last ``\\r`` segment;
    ``b""`` when the file ends with a newline or with anything else (``%``, ``]``, ``}``, a
    word: the line may be whole, as consoles leave a last line unended)."""
    end = handle.seek(0, io.SEEK_END)
    start = max(0, end - PROBE)
    handle.seek(start)
    return tail_cut(handle.read(), whole=start == 0)


def tail_cut(data: bytes, *, whole: bool) -> tuple[bytes, bool]:
    """:func:`cut_tail` of a file's last bytes ``data`` (``whole``: the whole file)."""
    if data.endswith(b"\n"):
        return b"", False
    after = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
    if after == 0 and not whole:
        return b"", False  # a last line longer than the probe: left as it is
    tail = data[after:]
    if not _CUT.search(tail):
        return b"", False
    return tail, after == 0 or data[after - 1:after] == b"\n"


def unparsed_finding(path: Path, bad: pl.DataFrame, what: str,
                     total: int | None = None) -> Finding | None:
    """One warning naming how many lines looked like ``what`` but did not parse, with the
    first few line numbers and texts; None when there are none. ``bad`` has ``line``, ``text``.
    """
    count = bad.height if total is None else total
    if count == 0:
        return None
    shown = "; ".join(f"line {row['line']}: {_snippet(row['text'])}"
                      for row in bad.head(3).iter_rows(named=True))
    return Finding("warning", "unparsed-lines",
                   f"{path}: {count} line{'s' * (count != 1)} looked like {what} but could not "
                   f"be fully parsed; what did not parse was skipped ({shown})")


def _snippet(text: str | None, width: int = 80) -> str:
    text = repr(text or "")[1:-1]
    return text if len(text) <= width else text[:width - 1] + "…"
