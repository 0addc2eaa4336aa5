"""The one mechanism every plain-text source reads lines and numbers with.

:func:`read_lines` reads a file in chunks of whole lines (``CHUNK_BYTES`` each, cut at the last
newline; a longer line makes a longer chunk): the main thread only finds where each chunk ends,
and two worker threads each read a chunk (into a buffer of their own when the source has a
layout) and parse it. A source with a layout (:mod:`._layout`) has the lines of its common
layouts read by the native scanner; the other lines (all of them for the other sources, or
without the scanner) become a polars frame of ``line`` (1-based line number) and ``text``
(UTF-8, invalid bytes replaced by U+FFFD), split by polars' own CSV reader, and go to the
source's vectorised ``parse`` function, which keeps only the rows it needs (one frame, or frames
by name). Line numbers are counted per chunk and made the file's once all chunks are in;
memory holds two chunks plus the kept rows, whatever the size of the log; nothing loops over
lines in Python. The same module holds the other shared pieces: number and timestamp
parsing, leg numbering, the unparsed-lines finding and
the choice of files (never W&B's own).

The CSV reader is told that the field separator is ``\\x1f`` (ASCII unit separator) and that
there are no quotes, so a line is one field; a ``\\x1f`` byte in a line is read as a space.
A file that ends without its last newline has that line read as it is and marked
(``Lines.unterminated``); formats whose writers end every record drop it (:meth:`Lines.complete`). Carriage returns inside a line (tqdm progress output) are kept;
:func:`split_cr` makes each ``\\r``-separated segment a row of its own, with its line number.
"""

from __future__ import annotations

import io
import os
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache, lru_cache, partial
from pathlib import Path

import numpy as np
import polars as pl

from ...errors import InputError, UsageError
from ...model import RAW_SCHEMA, Finding
from ..codecs.files import (
    LFS_POINTER,
    files_in,
    folder_stamp,
    natural,
    refuse_lfs_pointer,
    writable,
)
from . import layout as _layout
from .layout import Layout

__all__ = ["CHUNK_BYTES", "HEAD_BYTES", "Lines", "clean_text",
           "compile_pattern", "cut_finding", "head", "in_order", "without_cut_row",
           "log_files", "number", "number_legs", "read_lines", "record_lines", "split_cr", "timestamp",
           "to_raw", "unparsed_finding"]

#: Bytes of whole lines parsed at once.
CHUNK_BYTES = 16 << 20
#: Bytes of a file's beginning that ``sniff`` looks at.
HEAD_BYTES = 64 << 10
#: Bytes at the end of a chunk's span searched for its last newline before the whole span.
_PROBE = 64 << 10
#: Chunks parsed at the same time.
WORKERS = 2
#: Bytes of the longest line read: a longer one is no log line (an array or a file dumped
#: whole) and would cost minutes of parsing; it is left out, with an ``overlong-lines``
#: warning. A printed log_history of 20,000 entries fits.
MAX_LINE_BYTES = 4 << 20
#: Suffixes of the files in a folder that may hold captured stdout.
LOG_SUFFIXES = (".log", ".out", ".txt", ".err", ".jsonl", ".ndjson")
#: W&B's own files: its debug logs, and a run folder's copy of the console (``files/output.log``).
_WANDB_DEBUG = {"debug.log", "debug-internal.log", "debug-core.log"}
_WANDB_RUN = re.compile(r"(?:offline-)?run-\d{8}_\d{6}-\w+$")
_CSV = {"has_header": False, "separator": "\x1f", "quote_char": None,
        "schema": {"text": pl.String}, "encoding": "utf8-lossy", "truncate_ragged_lines": True,
        "extra_columns": "ignore"}
_ANSI = r"\x1b\[[0-9;?]*[A-Za-z]"


#: What a source's ``parse`` returns for a chunk: one frame, or frames by name (kept apart so
#: that rows of one kind do not carry null columns of another).
Parsed = pl.DataFrame | dict[str, pl.DataFrame]


@dataclass
class Lines:
    """What :func:`read_lines` kept of a file (``rows``, or ``tables`` by name when ``parse``
    returns several frames), and how many lines the file has."""

    rows: pl.DataFrame
    count: int
    #: Lines holding bytes that are not UTF-8 (read as U+FFFD), and the first of them.
    garbled: int = 0
    first_garbled: int | None = None
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    #: The number of the last line when the file ends without its newline (a writer killed
    #: mid-line, or one that never ends its last line), else None.
    unterminated: int | None = None
    #: The line cut off inside a number at the end of the file and the cut text, which was not
    #: read (see :func:`_cut_tail`).
    cut: tuple[int, str] | None = None
    #: Lines longer than :data:`MAX_LINE_BYTES`, left out: how many, the first and its bytes.
    overlong: tuple[int, int, int] | None = None

    def findings(self, path: Path) -> list[Finding]:
        """An info finding when some lines were not valid UTF-8, a warning when the last line
        was cut off inside a number."""
        found = []
        if self.garbled:
            found.append(Finding("info", "not-utf8",
                                 f"{path}: {self.garbled} of {self.count} lines hold bytes that "
                                 f"are not UTF-8 (first at line {self.first_garbled}); they were "
                                 "read with U+FFFD in place of those bytes"))
        if self.overlong is not None:
            count, line, size = self.overlong
            found.append(Finding("warning", "overlong-lines",
                                 f"{path}: {count} line{'s' * (count != 1)} longer than "
                                 f"{MAX_LINE_BYTES >> 20} MiB {'were' if count != 1 else 'was'} "
                                 f"not read (first: line {line}, {size:,} bytes): no log line is "
                                 "that long (an array or a file printed whole?); the other "
                                 "lines were read"))
        if self.cut is not None:
            found.append(cut_finding(path, *self.cut))
        return found


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
    tail, _ = _tail_cut(data, whole=True)
    return (data[:-len(tail)] if tail else data), tail


def head(path: Path, size: int = HEAD_BYTES) -> str:
    """The first ``size`` bytes of ``path`` as text ("" if it cannot be read); when they hold
    less than two whole lines (a megabyte-long first line), the ``size`` bytes after the
    first line end within the first ``CHUNK_BYTES`` are added. Kept for the file's size and
    mtime, so the text formats that look at one file in turn read it once."""
    try:
        stat = path.stat()
    except OSError:
        return ""
    return _head(str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino, size)


@lru_cache(maxsize=1 << 14)
def _head(path: str, _size: int, _mtime: int, _inode: int, size: int) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(size)
            if data.count(b"\n") < 2 and len(data) == size:
                rest = handle.read(CHUNK_BYTES)
                end = rest.find(b"\n")
                data += rest[end:end + size] if end >= 0 else b""
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")


def log_files(path: Path, claims: Callable[[str], bool]) -> list[Path]:
    """The files at ``path`` whose beginning ``claims`` accepts, in natural name order.

    ``path`` may be a file (taken whatever its name) or a folder (its own ``*.log``, ``*.out``,
    ``*.txt``, ``*.err``, ``*.jsonl`` and ``*.ndjson`` files; subfolders are not searched). W&B's debug logs and the
    console copy in a W&B run folder are never taken.
    """
    if path.is_file():
        candidates = [] if _is_wandb_file(path) else [path]
    else:
        candidates = _folder_logs(path)
    return [p for p in candidates if claims(head(p))]


def _folder_logs(folder: Path) -> list[Path]:
    """The log files in ``folder`` (:func:`log_files`), in natural name order."""
    stamp = folder_stamp(folder)  # one stat a folder inside codecs.files.one_look
    return [] if stamp is None else list(_logs_in(folder, *stamp))


@lru_cache(maxsize=1 << 10)
def _logs_in(folder: Path, _mtime: int, _inode: int) -> tuple[Path, ...]:
    """:func:`_folder_logs`, kept for the folder's mtime (an entry added, removed or renamed
    changes it), so the text formats that look at one folder in turn list it once."""
    if _in_wandb_run(folder):  # once for the folder's files, not once each
        return ()
    return tuple(sorted((file for file in files_in(folder) if file.suffix in LOG_SUFFIXES
                         and file.name not in _WANDB_DEBUG), key=lambda file: natural(file.name)))


def logs_at(path: Path, claims: Callable[[str], bool], *, missing: str) -> list[Path]:
    """The logs a source reads at ``path``: the claimed ones, else the file itself; raises
    :class:`InputError` saying what was looked for (``missing``) when there is none."""
    logs = log_files(path, claims) or ([path] if path.is_file() else [])
    if not logs:
        raise InputError(f"{path}: {missing}")
    return logs


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
    _, parsed, _ = _read_chunk((0, len(joined)), read=lambda span: joined, parse=parse,
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
    tail, _ = _tail_cut(data, whole=True)
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


def _is_wandb_file(path: Path) -> bool:
    return path.name in _WANDB_DEBUG or _in_wandb_run(path.resolve().parent)


def _in_wandb_run(folder: Path) -> bool:
    """Whether ``folder`` is in a W&B run folder (it, or one of its two parents)."""
    folder = folder.resolve()
    return any(_WANDB_RUN.match(f.name) for f in [folder, *folder.parents[:2]])


def read_lines(path: Path, parse: Callable[[pl.DataFrame], Parsed], *,
               chunk_bytes: int | None = None, workers: int | None = None,
               layout: Callable[[bytes], Layout | None] | None = None,
               merge: Merge | None = None) -> Lines:
    """``parse`` applied to every chunk of ``path``'s lines, the results in file order
    (concatenated per name when ``parse`` returns frames by name).

    Each chunk reaches ``parse`` as a frame of ``line`` (Int64, 1-based) and ``text`` (String;
    null for an empty line). With ``layout`` (the source's :class:`~._layout.Layout` of the
    lines of a chunk's bytes like its sample line, or None), the lines it matches are read by
    the native scanner, up to :data:`~._layout.MAX_LAYOUTS` layouts per chunk, ``parse`` gets
    the other lines only, and ``merge`` puts the scanner's rows (a frame per layout) into what
    ``parse`` gave (:func:`into` one frame of it, or the source's own). Raises
    :class:`InputError` for an unreadable or empty file.
    """
    try:
        if path.stat().st_size == 0:
            raise InputError(f"{path}: empty file; nothing was logged to it yet (point "
                             "runcompare at the log of a run that has started)")
        size = chunk_bytes or CHUNK_BYTES
        with path.open("rb") as handle:
            refuse_lfs_pointer(path, handle.read(len(LFS_POINTER)))
            # the scanner reads a chunk where it lies, in a buffer of the worker's own
            read = _reader(handle, size, reuse=bool(layout) and _layout.NATIVE)
            spans = list(_spans(handle, size))
            tail, whole_line = _cut_tail(handle)
            if tail:  # never read the cut number: a shorter last span
                start, length = spans[-1]
                spans[-1] = (start, length - len(tail))
            lines = _parse_chunks(spans, partial(_read_chunk, read=read, parse=parse,
                                                 layout=layout, merge=merge or into("rows")),
                                  workers or WORKERS)
            handle.seek(-1, io.SEEK_END)
            if handle.read(1) != b"\n":
                lines.unterminated = lines.count + (tail != b"" and whole_line)
            if tail:
                lines.cut = (lines.unterminated or lines.count, tail.decode("utf-8", "replace"))
            return lines
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror})") from exc
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{path}: cannot be parsed as text ({exc})") from exc


#: How the end of a line cut off mid-number looks: a digit, a decimal point, a sign, the
#: ``e`` of an exponent after a digit, or a thousands separator after one (``lm loss: 8.`` of
#: 8.486469, ``lr 3.0`` of 3.00e-04, ``tps: 6,`` of 6,544).
_CUT = re.compile(rb"(?:[0-9.+-]|[0-9][eE,])\Z")


def _cut_tail(handle: io.BufferedReader) -> tuple[bytes, bool]:
    """The bytes after the file's last newline or carriage return when the file ends inside a
    number (a line cut off while it was written: the value is damage, not a point), and
    whether they are a whole line (after a newline) rather than its last ``\\r`` segment;
    ``b""`` when the file ends with a newline or with anything else (``%``, ``]``, ``}``, a
    word: the line may be whole, as consoles leave a last line unended)."""
    end = handle.seek(0, io.SEEK_END)
    start = max(0, end - _PROBE)
    handle.seek(start)
    return _tail_cut(handle.read(), whole=start == 0)


def _tail_cut(data: bytes, *, whole: bool) -> tuple[bytes, bool]:
    """:func:`_cut_tail` of a file's last bytes ``data`` (``whole``: the whole file)."""
    if data.endswith(b"\n"):
        return b"", False
    after = max(data.rfind(b"\n"), data.rfind(b"\r")) + 1
    if after == 0 and not whole:
        return b"", False  # a last line longer than the probe: left as it is
    tail = data[after:]
    if not _CUT.search(tail):
        return b"", False
    return tail, after == 0 or data[after - 1:after] == b"\n"


def _spans(handle: io.BufferedReader, size: int) -> Iterator[tuple[int, int]]:
    """(start, length) of chunks of whole lines covering the file: the k-th chunk ends at the
    last newline before byte (k + 1) × ``size`` (a line longer than ``size`` makes a longer
    chunk), looked for in a small read at the end of that span first."""
    start = block = 0
    while True:
        block += size
        low = max(start, block - _PROBE)
        handle.seek(low)
        span = handle.read(block - low)
        found = span.rfind(b"\n")
        if found < 0 and low > start:  # not in the last bytes: look through the whole block
            low = max(start, block - size)
            handle.seek(low)
            span = handle.read(block - low)
            found = span.rfind(b"\n")
        if found >= 0:
            yield start, low + found + 1 - start
            start = low + found + 1
        elif len(span) < block - low:  # the end of the file, after a last line without newline
            end = handle.seek(0, io.SEEK_END)
            if end > start:
                yield start, end - start
            return


def _reader(handle: io.BufferedReader, size: int, *,
            reuse: bool) -> Callable[[tuple[int, int]], bytes]:
    """What reads a span of the file in a worker thread. With ``reuse``, into the thread's own
    buffer (no fresh memory, page by page, for each chunk of a long log; and the scanner
    reads the chunk while it is still in the processor's cache): the span's bytes stay valid
    until the thread reads its next span."""
    fd, local = handle.fileno(), threading.local()

    def read(span: tuple[int, int]) -> bytes:
        start, count = span
        if not hasattr(os, "pread"):  # Windows: a handle of the chunk's own to seek
            with open(handle.name, "rb") as own:
                own.seek(start)
                return own.read(count)
        if not reuse or count > size or not hasattr(os, "preadv"):
            return _pread(fd, count, start)
        if not hasattr(local, "buffer"):
            local.buffer = writable(size)
        view = memoryview(local.buffer)[:count]
        got = 0
        while got < count:
            more = os.preadv(fd, [view[got:]], start + got)
            if not more:
                break
            got += more
        return view[:got]  # type: ignore[return-value]

    return read


def _pread(fd: int, count: int, start: int) -> bytes:
    parts, got = [], 0
    while got < count:
        part = os.pread(fd, count - got, start + got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)


#: Puts the scanner's rows (a frame per layout) into what ``parse`` gave for the other lines.
Merge = Callable[[Parsed, list[pl.DataFrame]], Parsed]


def into(name: str) -> Merge:
    """The :data:`Merge` that adds the scanner's rows to the frame ``name`` of ``parse``'s result
    (``"rows"``: its one frame), in line order."""
    def merge(parsed: Parsed, scanned: list[pl.DataFrame]) -> Parsed:
        tables = dict(parsed) if isinstance(parsed, dict) else {"rows": parsed}
        tables[name] = in_order([tables[name], *scanned], "line")
        return tables if isinstance(parsed, dict) else tables["rows"]
    return merge


def in_order(parts: list[pl.DataFrame], *by: str) -> pl.DataFrame:
    """``parts`` (each in ``by`` order) as one frame in that order: sorted only when two of
    them hold rows."""
    joined = pl.concat(parts, how="diagonal_relaxed")
    return joined.sort(*by) if sum(part.height > 0 for part in parts) > 1 else joined


#: What a chunk gives: its line count, what was parsed (line numbers counted from the chunk's
#: start) and its first line that is not UTF-8 with their count (``line``, ``n``).
_Chunk = tuple[int, Parsed, pl.DataFrame]


def _read_chunk(span: tuple[int, int], *, read: Callable[[tuple[int, int]], bytes],
                parse: Callable[[pl.DataFrame], Parsed],
                layout: Callable[[bytes], Layout | None] | None, merge: Merge) -> _Chunk:
    """One chunk: read, the lines of its layouts scanned natively, the rest split into a
    frame of lines by polars' CSV reader and parsed by ``parse``."""
    data = read(span)
    garbled = _garbled(data)  # of every line, before the scanner takes its own
    scanned: list[pl.DataFrame] = []
    count, index = None, None  # index: the chunk's line index of each line left in data
    for _ in range(_layout.MAX_LAYOUTS if layout else 0):
        found = layout(data)
        if found is None:
            break
        lines, rows, data, rest = _layout.scan(data, found)
        if index is None:
            count = lines
        else:
            rows = rows.with_columns(line=pl.Series(index).gather(rows.get_column("line")))
            rest = index[rest]
        scanned.append(rows.with_columns(pl.col("line") + 1))
        index = rest
        if not data:
            break
    text = bytes(data)
    if b"\x1f" in text:  # the CSV reader's separator: one field per line
        text = text.replace(b"\x1f", b" ")
    frame = (pl.read_csv(text, **_CSV) if text  # type: ignore[call-overload]
             else pl.DataFrame(schema={"text": pl.String}))
    line = pl.Series("line", index + 1 if index is not None else np.arange(1, frame.height + 1))
    frame = frame.select(line, "text")
    marks = garbled
    if len(text) > MAX_LINE_BYTES:  # a chunk this long may hold a line too long to read
        size = pl.col("text").str.len_bytes()
        overlong = frame.filter(size > MAX_LINE_BYTES)
        if overlong.height:
            frame = frame.with_columns(text=pl.when(size > MAX_LINE_BYTES).then(None)
                                       .otherwise("text"))
            marks = pl.DataFrame({"line": [marks["line"][0] if marks.height else None],
                                  "n": [int(garbled["n"].sum())], "long_n": [overlong.height],
                                  "long_line": [overlong["line"][0]],
                                  "long_bytes": [overlong.select(size).item(0, 0)]},
                                 schema_overrides={"line": pl.Int64, "n": marks.schema["n"]})
    parsed = parse(frame) if frame.height else _empty(parse)
    parsed = merge(parsed, scanned) if scanned else parsed
    return (frame.height if count is None else count, parsed, marks)


def _garbled(data: bytes | memoryview) -> pl.DataFrame:
    """The first line (1-based, in the chunk) holding bytes that are not UTF-8 and how many
    do; no row when every line is UTF-8 (nearly always: one decode tells it)."""
    if isinstance(data, (bytes, bytearray)) and data.isascii():
        return _NO_GARBLED  # nearly every log: no decode, no copy
    try:
        str(data, "utf-8")
    except UnicodeDecodeError:
        bad = [index + 1 for index, line in enumerate(bytes(data).split(b"\n"))
               if line.decode("utf-8", "replace") != line.decode("utf-8", "ignore")]
        if bad:
            return pl.DataFrame({"line": [bad[0]], "n": [len(bad)]}, schema=_GARBLED)
    return _NO_GARBLED


_GARBLED = {"line": pl.Int64, "n": pl.Int64}
_NO_GARBLED = pl.DataFrame(schema=_GARBLED)


@cache
def _empty(parse: Callable[[pl.DataFrame], Parsed]) -> Parsed:
    """What ``parse`` gives for no lines (a chunk that the scanner read whole)."""
    return parse(pl.DataFrame(schema={"line": pl.Int64, "text": pl.String}))


def _parse_chunks(spans: list[tuple[int, int]], read: Callable[[tuple[int, int]], _Chunk],
                  workers: int) -> Lines:
    """``read`` of each chunk, two at a time in threads (reading, polars and the scanner
    release the GIL; a file of one chunk is read without them); line numbers made the
    file's once all are in, by one addition per frame."""
    results: list[_Chunk] = []
    if len(spans) == 1:
        results.append(read(spans[0]))
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            pending: deque[Future[_Chunk]] = deque()
            for span in spans:
                pending.append(pool.submit(read, span))
                if len(pending) > workers:
                    results.append(pending.popleft().result())
            results += [future.result() for future in pending]
    counts = np.array([count for count, _, _ in results], dtype=np.int64)
    before = np.cumsum(counts) - counts  # lines of the chunks before each
    tables: dict[str, list[tuple[int, pl.DataFrame]]] = {}
    for chunk, (_, parsed, garbled) in enumerate(results):
        for name, frame in (parsed.items() if isinstance(parsed, dict) else [("rows", parsed)]):
            tables.setdefault(name, []).append((chunk, frame))
        tables.setdefault("", []).append((chunk, garbled))
    joined = {}
    for name, parts in tables.items():
        frames = [frame for _, frame in parts]
        same = all(frame.schema == frames[0].schema for frame in frames)
        frame = pl.concat(frames, how="vertical" if same else "diagonal_relaxed", rechunk=False)
        shift = np.repeat(before[[chunk for chunk, _ in parts]], [f.height for f in frames])
        joined[name] = frame.with_columns(pl.col("line") + pl.Series(shift))
    garbled = joined.pop("")
    first = garbled.get_column("line").min() if garbled.height else None
    lines = Lines(joined.get("rows", pl.DataFrame()), int(counts.sum()),
                  int(garbled.get_column("n").sum()), first, joined)  # type: ignore[arg-type]
    long = [frame for _, frame in tables[""] if "long_n" in frame.columns]
    if long:  # the chunk's line number made the file's, as for the other rows
        at = [chunk for chunk, frame in tables[""] if "long_n" in frame.columns]
        lines.overlong = (sum(int(f["long_n"][0]) for f in long),
                          int(long[0]["long_line"][0] + before[at[0]]), int(long[0]["long_bytes"][0]))
    return lines


def split_cr(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per ``\\r``-separated segment of each line (tqdm redraws), line numbers kept."""
    return (frame.with_columns(pl.col("text").str.split("\r")).explode("text")
            .filter(pl.col("text").str.len_bytes() > 0))


def clean_text(text: pl.Expr) -> pl.Expr:
    """``text`` without ANSI colour and cursor codes."""
    return text.str.replace_all(_ANSI, "")


def number(text: pl.Expr) -> pl.Expr:
    """A printed number as Float64: thousands commas, quotes, spaces and a unit suffix
    (``%``, ``ms``, ``GiB``, ...) dropped; ``nan`` and ``inf`` kept; anything else null.

    >>> s = pl.Series(["1,234", " '2.346' ", "30.12GiB", "-1.5E-04", "nan", "N/A", "120.00ms"])
    >>> pl.select(number(pl.lit(s))).to_series().to_list()
    [1234.0, 2.346, 30.12, -0.00015, nan, None, 120.0]
    """
    cleaned = text.str.strip_chars(" '\"").str.replace_all(",", "", literal=True)
    value = cleaned.str.extract(r"^([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
                                r"|(?i:nan|inf|infinity)))(?:[A-Za-z%/]*)$", 1)
    return value.cast(pl.Float64, strict=False)


def timestamp(text: pl.Expr) -> pl.Expr:
    """Unix seconds of an ``YYYY-MM-DD HH:MM:SS[.ffffff|,mmm]`` stamp read as UTC (the log
    says no zone), null when ``text`` holds none.

    >>> pl.select(timestamp(pl.lit("2024-01-24 10:00:00.5"))).item()
    1706090400.5
    """
    stamp = text.str.extract(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?", 0)
    parsed = stamp.str.replace(",", ".", literal=True).str.replace("T", " ", literal=True) \
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False)
    return parsed.dt.epoch("us").cast(pl.Float64) / 1e6


def number_legs(rows: pl.DataFrame, *, launch: str, stepped: str, step: str = "step",
                points: str | None = None) -> pl.Series:
    """Leg numbers (0, 1, ...) of ``rows`` (in file order), Int32.

    A new leg starts at a row where the boolean column ``launch`` is true (the banner a
    trainer prints when it starts) and at a ``stepped`` row whose ``step`` does not go up
    from the previous stepped row's without a launch in between (a restart that went back to
    a checkpoint). Numbers start at 0 at the first ``points`` row (default: ``stepped``).

    >>> rows = pl.DataFrame({"launch": [1, 0, 0, 0, 1, 0, 0, 0], "stepped": [0, 1, 1, 1, 0, 1, 1, 1],
    ...                      "step": [None, 1, 2, 3, None, 2, 3, 1]}).cast({"launch": bool,
    ...                                                                   "stepped": bool})
    >>> number_legs(rows, launch="launch", stepped="stepped").to_list()
    [0, 0, 0, 0, 1, 1, 1, 2]
    """
    launch_, stepped_ = pl.col(launch), pl.col(stepped)
    launches = launch_.cast(pl.Int64).cum_sum()
    previous = pl.when(stepped_).then(pl.col(step)).forward_fill().shift(1)
    launches_before = pl.when(stepped_).then(launches).forward_fill().shift(1)
    back = stepped_ & (pl.col(step) <= previous) & (launches == launches_before)
    raw = rows.select((launch_ | back.fill_null(False)).cast(pl.Int32).cum_sum()).to_series()
    origin = raw.filter(rows.get_column(points or stepped)).min()
    return (raw - (origin or 0)).clip(lower_bound=0).cast(pl.Int32).alias("leg")


def to_raw(frame: pl.DataFrame, columns: Mapping[str, str]) -> pl.DataFrame:
    """Long :data:`RAW_SCHEMA` rows from a wide frame with ``step``, ``wall_time`` and ``leg``
    columns: one row per non-null value of each column in ``columns`` (column -> metric).
    """
    present = {c: m for c, m in columns.items() if c in frame.columns}
    if not present or frame.is_empty():
        return pl.DataFrame(schema=RAW_SCHEMA)
    # columns of one chunk each: a select over columns cut into chunks at different rows
    # (a log's chunks, and a leg column computed whole) would realign them for every metric
    frame = frame.select("step", "wall_time", "leg", *present).rechunk()
    axes = [pl.col("step").cast(pl.Int64), pl.col("wall_time").cast(pl.Float64),
            pl.col("leg").cast(pl.Int32)]
    metrics: dict[str, list[str]] = {}
    for column, metric in present.items():
        metrics.setdefault(metric, []).append(column)
    parts = []
    for metric, names in metrics.items():
        part = frame.select(*axes, metric=pl.lit(metric, pl.String),
                            value=pl.coalesce(names).cast(pl.Float64))
        # a column logged on every line has no nulls: no filtering copy of the axes then
        parts.append(part.filter(pl.col("value").is_not_null())
                     if part.get_column("value").null_count() else part)
    # one part per metric, not copied into one block: the points are the memory a log costs
    return pl.concat(parts, rechunk=False).select(*RAW_SCHEMA)


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


def compile_pattern(pattern: str) -> list[str]:
    """The named groups of a user's ``--pattern`` regex; :class:`UsageError` when polars'
    (Rust) regex engine rejects it or it has no ``step`` or ``iter`` group.
    """
    try:
        pl.select(pl.lit("").str.extract_groups(pattern))
    except pl.exceptions.PolarsError as exc:
        raise UsageError(f"--pattern {pattern!r} is not a valid regular expression ({exc}); "
                         "runcompare uses Rust regex syntax: no look-around or "
                         "backreferences") from exc
    names = re.findall(r"\(\?P?<([A-Za-z_]\w*)>", pattern)
    if not {"step", "iter"} & set(names):
        raise UsageError(f"--pattern {pattern!r} needs a named group (?P<step>...) or "
                         "(?P<iter>...) holding the step; other named groups become metrics")
    return names
