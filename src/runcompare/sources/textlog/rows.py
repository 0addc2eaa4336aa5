"""The rows of a run's logs: every log parsed into one frame ordered across files
(:func:`read_rows`, small logs parsed together), and the lines of a file whose writer ends
every row (:func:`record_lines`: a CSV, an MLflow metric file).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import polars as pl

from ...errors import InputError
from ...model import Finding
from ..codecs.files import LFS_POINTER, refuse_lfs_pointer
from .damage import tail_cut
from .layout import Layout
from .lines import Lines, Parsed, into, read_chunk, read_lines

__all__ = ["SMALL_BYTES", "read_rows", "record_lines"]


def read_rows(logs: list[Path], parse: Callable[[pl.DataFrame], Parsed], *,
              layout: Callable[[bytes], Layout | None] | None = None,
              ) -> tuple[pl.DataFrame, list[Finding]]:
    """Every log's parsed rows in one frame (the scanner's, with ``layout``, among them),
    ``pos`` ordering them across files (the file's index in the high bits, its line number
    in the low), and the reading findings."""
    parts: list[pl.DataFrame] = []
    findings: list[Finding] = []
    small = [_size(file) < SMALL_BYTES for file in logs] if len(logs) > 1 else [False]
    batch: list[tuple[int, Path]] = []
    for index, file in enumerate(logs):
        if small[index]:
            batch.append((index, file))
            if len(batch) < _BATCH and index + 1 < len(logs) and small[index + 1]:
                continue
            parts.append(_read_small(batch, parse, layout, findings))
            batch = []
            continue
        lines = read_lines(file, parse, layout=layout)
        parts.append(lines.rows.with_columns(pos=pl.col("line") + (index << 40)))
        findings += lines.findings(file)
    return pl.concat(parts, how="diagonal_relaxed"), findings


#: Logs smaller than this, when there are several, are parsed together: one pass of ``parse``
#: over their lines (a folder of thousands of small logs costs a few polars passes, not one
#: per file), up to :data:`_BATCH` files at a time.
SMALL_BYTES = 64 << 10
_BATCH = 256


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:
        return SMALL_BYTES  # read alone: read_lines says what is wrong with it


def _read_small(batch: list[tuple[int, Path]], parse: Callable[[pl.DataFrame], Parsed],
                layout: Callable[[bytes], Layout | None] | None,
                findings: list[Finding]) -> pl.DataFrame:
    """:func:`read_lines` of several small logs at once, the rows' ``line`` and ``pos`` those
    of each one's own file: the same rows and findings as reading them one by one."""
    datas, counts = [], []
    for _, file in batch:
        data = _small_bytes(file, findings)
        datas.append(data)
        counts.append(data.count(b"\n"))
    joined = b"".join(datas)
    _, parsed, _ = read_chunk((0, len(joined)), read=lambda span: joined, parse=parse,
                               layout=layout, merge=into("rows"))
    rows = parsed["rows"] if isinstance(parsed, dict) else parsed
    starts = np.cumsum([0, *counts])  # lines before each file
    line = rows.get_column("line").to_numpy() - 1
    owner = np.searchsorted(starts, line, side="right") - 1
    indexes = np.array([index for index, _ in batch], dtype=np.int64)
    own_line = line - starts[owner] + 1
    return rows.with_columns(line=pl.Series(own_line), pos=pl.Series(
        (indexes[owner] << 40) + own_line))


def _small_bytes(file: Path, findings: list[Finding]) -> bytes:
    """A small log's bytes as :func:`read_lines` would read them (a cut last number left out,
    a last line without its newline given one), with the same errors and findings."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise InputError(f"{file}: cannot be read ({exc.strerror})") from exc
    if not data:
        raise InputError(f"{file}: empty file; nothing was logged to it yet (point "
                         "runcompare at the log of a run that has started)")
    refuse_lfs_pointer(file, data[:len(LFS_POINTER)])
    data = data.replace(b"\x1f", b" ")
    lines = Lines(pl.DataFrame(), data.count(b"\n") + (not data.endswith(b"\n")))
    tail, _ = tail_cut(data, whole=True)
    if tail:  # the last line's number
        lines.cut = (lines.count, tail.decode("utf-8", "replace"))
        data = data[:-len(tail)]
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        bad = [i + 1 for i, line in enumerate(data.split(b"\n"))
               if line.decode("utf-8", "replace") != line.decode("utf-8", "ignore")]
        lines.garbled, lines.first_garbled = len(bad), bad[0] if bad else None
    findings += lines.findings(file)
    return data if not data or data.endswith(b"\n") else data + b"\n"


def record_lines(file: Path) -> tuple[pl.DataFrame, list[Finding]]:
    """The lines of a text file whose writer ends every row with a newline (a CSV, an MLflow
    metric file): ``line`` and ``text``, blank lines and a cut-off last line left out (with a
    ``damaged-input`` warning)."""
    lines = read_lines(file, _non_blank)
    rows, findings = lines.rows, lines.findings(file)
    if lines.unterminated is not None and lines.cut is None:  # such a writer ends every row
        rows = rows.filter(pl.col("line") != lines.unterminated)
        findings.append(Finding("warning", "damaged-input",
                                f"{file}: line {lines.unterminated} is cut off (the file ends "
                                "mid-line, as when a run is killed while writing); dropped it"))
    return rows, findings


def _non_blank(frame: pl.DataFrame) -> pl.DataFrame:
    text = pl.col("text").str.strip_chars_end("\r")
    return frame.select("line", text).filter(text.str.strip_chars() != "")
