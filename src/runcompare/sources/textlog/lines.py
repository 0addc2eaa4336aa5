"""A file's lines read in chunks: the one mechanism every plain-text source reads lines with.

:func:`read_lines` reads a file in chunks of whole lines (``CHUNK_BYTES`` each, cut at the last
newline; a longer line makes a longer chunk): the main thread only finds where each chunk ends,
and two worker threads each read a chunk (into a buffer of their own when the source has a
layout) and parse it. A source with a layout (:mod:`.layout`) has the lines of its common
layouts read by the native scanner; the other lines (all of them for the other sources, or
without the scanner) become a polars frame of ``line`` (1-based line number) and ``text``
(UTF-8, invalid bytes replaced by U+FFFD), split by polars' own CSV reader, and go to the
source's vectorised ``parse`` function, which keeps only the rows it needs (one frame, or frames
by name). Line numbers are counted per chunk and made the file's once all chunks are in;
memory holds two chunks plus the kept rows, whatever the size of the log; nothing loops over
lines in Python.

The other jobs of reading text are modules beside this one: which files are logs
(:mod:`.logs`), the rows of several logs and of record files (:mod:`.rows`), printed text to
values (:mod:`.values`), rows to points and legs (:mod:`.points`), and damage found and said
(:mod:`.damage`).

The CSV reader is told that the field separator is ``\\x1f`` (ASCII unit separator) and that
there are no quotes, so a line is one field; a ``\\x1f`` byte in a line is read as a space.
A file that ends without its last newline has that line read as it is and marked
(``Lines.unterminated``); a file that ends inside a number has that number left unread
(``Lines.cut``, :func:`~.damage.cut_tail`). Carriage returns inside a line (tqdm progress
output) are kept; :func:`~.values.split_cr` makes each ``\\r``-separated segment a row of its
own, with its line number.
"""

from __future__ import annotations

import io
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

import numpy as np
import polars as pl

from ...errors import InputError
from ...model import Finding
from ..codecs.files import LFS_POINTER, refuse_lfs_pointer, writable
from . import layout as _layout
from .damage import PROBE, cut_finding, cut_tail
from .layout import Layout

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

__all__ = ["CHUNK_BYTES", "MAX_LINE_BYTES", "Lines", "Merge", "Parsed", "in_order", "into",
           "read_chunk", "read_lines"]

#: Bytes of whole lines parsed at once.
CHUNK_BYTES = 16 << 20
#: Chunks parsed at the same time.
WORKERS = 2
#: Bytes of the longest line read: a longer one is no log line (an array or a file dumped
#: whole) and would cost minutes of parsing; it is left out, with an ``overlong-lines``
#: warning. A printed log_history of 20,000 entries fits.
MAX_LINE_BYTES = 4 << 20


class _CsvOptions(TypedDict):
    """The options of ``pl.read_csv`` that read a chunk's lines as one field each."""

    has_header: bool
    separator: str
    quote_char: str | None
    schema: dict[str, PolarsDataType]
    encoding: Literal["utf8-lossy"]
    truncate_ragged_lines: bool
    extra_columns: Literal["ignore"]


_CSV: _CsvOptions = {"has_header": False, "separator": "\x1f", "quote_char": None,
                     "schema": {"text": pl.String}, "encoding": "utf8-lossy",
                     "truncate_ragged_lines": True, "extra_columns": "ignore"}

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
    #: read (see :func:`cut_tail`).
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
            tail, whole_line = cut_tail(handle)
            if tail:  # never read the cut number: a shorter last span
                start, length = spans[-1]
                spans[-1] = (start, length - len(tail))
            lines = _parse_chunks(spans, partial(read_chunk, read=read, parse=parse,
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


def _spans(handle: io.BufferedReader, size: int) -> Iterator[tuple[int, int]]:
    """(start, length) of chunks of whole lines covering the file: the k-th chunk ends at the
    last newline before byte (k + 1) × ``size`` (a line longer than ``size`` makes a longer
    chunk), looked for in a small read at the end of that span first."""
    start = block = 0
    while True:
        block += size
        low = max(start, block - PROBE)
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


def read_chunk(span: tuple[int, int], *, read: Callable[[tuple[int, int]], bytes],
                parse: Callable[[pl.DataFrame], Parsed],
                layout: Callable[[bytes], Layout | None] | None, merge: Merge) -> _Chunk:
    """One chunk: read, the lines of its layouts scanned natively, the rest split into a
    frame of lines by polars' CSV reader and parsed by ``parse``."""
    data = read(span)
    garbled = _garbled(data)  # of every line, before the scanner takes its own
    scanned: list[pl.DataFrame] = []
    count, index = None, None  # index: the chunk's line index of each line left in data
    for _ in range(_layout.MAX_LAYOUTS if layout else 0):
        found = layout(data) if layout else None
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
    frame = pl.read_csv(text, **_CSV) if text else pl.DataFrame(schema={"text": pl.String})
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
