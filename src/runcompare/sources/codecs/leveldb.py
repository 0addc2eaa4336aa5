"""The LevelDB log framing of W&B's ``.wandb`` files: header, 32 KiB blocks, chunks, CRC-32.

Layout (FORMATS.md §3)::

    header   7 bytes  b":W&B" | u16 0xBEE1 (little-endian) | u8 version 0
    blocks   32 KiB each (the first one starts with the header); each holds chunks
    chunk    u32 crc | u16 length | u8 type | data[length]      (little-endian)
             crc = zlib CRC-32 of the type byte + data; type FULL=1 FIRST=2 MIDDLE=3 LAST=4
             a block tail shorter than 7 bytes is zero padding

A record is one FULL chunk or FIRST, MIDDLE..., LAST. A crashed writer leaves a torn last chunk
or a zero-filled tail; a bad disk leaves a chunk whose CRC does not match. :func:`read_records`
keeps every complete record and describes each damaged stretch with its byte offset.

Speed: wandb writes about three records per ``log()`` call, so a file of a million values holds
some 300,000 chunks; handling them one by one in Python is what used to cost the most. A chunk
never crosses a block boundary, so :func:`_frame` walks the chunks of *all* blocks in lockstep
with numpy (one chunk of every block per step). CRC-32 is linear, so the CRCs of all chunks are
checked with a few ``zlib.crc32`` calls over about 1 MiB each (:func:`_first_bad_crc`): each
chunk's stored CRC, turned into the value of a zero-register CRC, is written after its data in
a copy of the stretch (over the next chunk's header or the block padding), which brings the
register back to zero for the next chunk; a stretch whose total is wrong is split in halves to
find its first bad chunk. Records split over several chunks (one per block boundary) are made
contiguous by moving their pieces over the chunk headers between them, in place when ``data``
is writable (the readers pass an anonymous ``mmap``), else in a copy; the CRC patches are then
written into ``data`` itself too, and undone after the check. Everything from the first anomaly
(bad header, bad CRC, chunk order, torn or zero-filled tail) on is walked chunk by chunk by
:func:`_scan`, the plain reference reader (:func:`read_records_sequential` runs it over the
whole file), so damage is reported exactly as before.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from .files import Buffer

__all__ = ["BLOCK", "HEADER", "HeaderError", "Records", "read_records", "read_records_sequential"]

BLOCK = 32 * 1024
#: Magic, then 0xBEE1 as a little-endian u16, then version 0.
HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
_CHUNK_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4
_unpack = struct.Struct("<IHB").unpack_from
_U32 = 0xFFFFFFFF
#: Bytes per ``zlib.crc32`` call when checking CRCs in bulk.
_PIECE = 1 << 20
#: Threads that check the CRCs of a large file's stretches.
WORKERS = 2

#: (start, end) spans in the data of the pieces of one record, in order.
Pieces = list[tuple[int, int]]
#: Records as columns: the file offset of each one's first chunk, its start and its end.
Spans = tuple[np.ndarray, np.ndarray, np.ndarray]


class HeaderError(ValueError):
    """The bytes do not start with the ``.wandb`` header."""


@dataclass
class Records:
    """Complete record payloads as spans of ``blob``, each with the byte offset of its first
    chunk in the file, and the damage found.

    ``blob`` is the file's bytes, with each record that spanned several chunks made
    contiguous over the chunk headers between its pieces (so chunk headers inside such a
    record's span are gone): the ``data`` given to :func:`read_records` itself when it was
    writable, else ``data`` or a copy of it.
    """

    blob: Buffer = b""
    starts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    ends: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    #: (byte offset, what is wrong there), in file order
    damage: list[tuple[int, str]] = field(default_factory=list)

    @property
    def payloads(self) -> list[bytes]:
        """Each record's bytes (copies; the readers use the spans)."""
        return [bytes(self.blob[a:b]) for a, b in zip(self.starts.tolist(), self.ends.tolist())]


#: CRC-32 of each chunk type byte, the running start of a chunk's CRC.
_TYPE_CRC = {kind: zlib.crc32(bytes((kind,))) for kind in (_FULL, _FIRST, _MIDDLE, _LAST)}


def read_records(data: Buffer) -> Records:
    """Every complete record in ``data`` (a whole ``.wandb`` file), and where it is damaged.

    A writable buffer (``bytearray``, ``mmap``) is used as the result's ``blob`` and changed
    in place (records split over several chunks are made contiguous); ``bytes`` are copied
    only when that is needed.
    Raises :class:`HeaderError` when the header is missing or of another version.

    >>> rec = b"hi"; crc = zlib.crc32(bytes([1]) + rec)
    >>> read_records(HEADER + struct.pack("<IHB", crc, 2, 1) + rec).payloads
    [b'hi']
    """
    if data[: len(HEADER)] != HEADER:
        raise HeaderError(_describe_header(data[: len(HEADER)]))
    buf = np.frombuffer(data, np.uint8)
    pos, end, kind, stop = _frame(buf)
    # chunk order: MIDDLE/LAST exactly after FIRST/MIDDLE
    opens = (kind == _FIRST) | (kind == _MIDDLE)
    follows = (kind == _MIDDLE) | (kind == _LAST)
    wrong = np.flatnonzero(follows != np.concatenate(([False], opens[:-1])))
    checked = int(wrong[0]) if wrong.size else len(pos)
    cut, restore = _first_bad_crc(buf, pos[:checked], end[:checked])
    stop = int(pos[cut]) if cut < len(pos) else stop
    # resume at the first chunk of the record the anomaly is in (or at the anomaly)
    first = np.flatnonzero(kind[:cut] == _FIRST)
    if cut and opens[cut - 1]:
        cut = int(first[-1])
        stop = int(pos[cut])
    if cut < checked:  # the chunk-by-chunk walk from ``stop`` reads the checked headers
        restore()
    del buf
    full: list[int] = []
    multi: list[tuple[int, Pieces]] = []
    damage: list[tuple[int, str]] = []
    _scan(data, full, multi, damage, stop)
    pos, end, kind = pos[:cut], end[:cut], kind[:cut]
    whole = kind == _FULL
    # three runs of records, each in file order: sound FULL chunks and split records before
    # ``stop``, then what the chunk-by-chunk walk kept after it
    runs: list[Spans] = [(pos[whole], pos[whole] + _CHUNK_HEADER, end[whole])]
    blob = data
    split = np.flatnonzero(~whole)
    if split.size or multi:  # joined in place: in data when it is writable, else in a copy
        joined_in = data if not isinstance(data, bytes) and not memoryview(data).readonly \
            else bytearray(data)
        blob = joined_in
        bounds = np.flatnonzero(kind[split] == _FIRST)
        pieces = [(int(pos[split[a]]), list(zip((pos[split[a:b]] + _CHUNK_HEADER).tolist(),
                                                end[split[a:b]].tolist())))
                  for a, b in zip(bounds.tolist(), [*bounds[1:].tolist(), len(split)])]
        joined = np.array([(start, *_join_in_place(joined_in, parts))
                           for start, parts in pieces + multi], np.int64).reshape(-1, 3)
        if len(pieces):
            runs[0] = _merge_runs(runs[0], _columns(joined[:len(pieces)]))
        runs.append(_columns(joined[len(pieces):]))
    if full:
        at = np.array(full, np.int64)
        tail = np.frombuffer(blob, np.uint8)
        lengths = tail[at + 4].astype(np.int64) | tail[at + 5].astype(np.int64) << 8
        del tail
        runs[1:] = [_merge_runs((at, at + _CHUNK_HEADER, at + _CHUNK_HEADER + lengths),
                                *runs[1:])]
    offsets, starts, ends = (np.concatenate(c) for c in zip(*runs))
    return Records(blob, starts, ends, offsets, damage)


def _columns(rows: np.ndarray) -> Spans:
    """The columns of an ``(n, 3)`` array of ``(offset, start, end)`` rows."""
    return rows[:, 0], rows[:, 1], rows[:, 2]


def _merge_runs(first: Spans, second: Spans | None = None) -> Spans:
    """Two sets of ``(offsets, starts, ends)``, each in file order, merged in file order (no
    offset is in both)."""
    if second is None or not len(second[0]):
        return first
    a, b = first[0], second[0]
    at_a = np.arange(len(a)) + np.searchsorted(b, a)
    at_b = np.arange(len(b)) + np.searchsorted(a, b)
    out = []
    for x, y in zip(first, second):
        merged = np.empty(len(x) + len(y), np.int64)
        merged[at_a], merged[at_b] = x, y
        out.append(merged)
    return out[0], out[1], out[2]


def read_records_sequential(data: bytes) -> Records:
    """:func:`read_records` the plain way, chunk by chunk in Python (the reference the fast
    path is tested against)."""
    if data[: len(HEADER)] != HEADER:
        raise HeaderError(_describe_header(data[: len(HEADER)]))
    full: list[int] = []
    multi: list[tuple[int, Pieces]] = []
    damage: list[tuple[int, str]] = []
    _scan(data, full, multi, damage, len(HEADER))
    records = [(p, p + _CHUNK_HEADER, p + _CHUNK_HEADER + _unpack(data, p)[1]) for p in full]
    extra = bytearray()
    for start, parts in multi:
        a = len(data) + len(extra)
        extra += b"".join(data[x:y] for x, y in parts)
        records.append((start, a, len(data) + len(extra)))
    records.sort()
    array = np.array(records, np.int64).reshape(-1, 3)
    return Records(data + bytes(extra) if extra else data, array[:, 1].copy(),
                   array[:, 2].copy(), array[:, 0].copy(), damage)


def _frame(buf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Positions, ends and types of the sound chunks before the first bad chunk header, in
    file order, and the offset of that header (the file size when there is none).

    Walks every block at once: step ``k`` reads the ``k``-th chunk header of each block whose
    walk is not over. A header is sound when its type is FULL..LAST and its chunk ends inside
    the block and the file; a walk ends at the block's zero padding, at the end of the file or
    at an unsound header (the CRCs are checked later).
    """
    size = buf.size
    first = np.arange(len(HEADER) // BLOCK, (size + BLOCK - 1) // BLOCK, dtype=np.int64) * BLOCK
    limit = first + BLOCK
    pos = np.maximum(first, len(HEADER))
    stop = size
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # block, pos, end, kind
    live = np.flatnonzero(pos < size)
    while live.size:
        at = pos[live]
        room = limit[live] - at
        padded = room < _CHUNK_HEADER
        torn = ~padded & (at + _CHUNK_HEADER > size)
        safe = np.minimum(at, size - _CHUNK_HEADER) if size >= _CHUNK_HEADER else at * 0
        length = buf[safe + 4].astype(np.int64) | buf[safe + 5].astype(np.int64) << 8
        kind = buf[safe + 6]
        after = at + _CHUNK_HEADER + length
        sound = ~padded & ~torn & (kind >= _FULL) & (kind <= _LAST) \
            & (length <= room - _CHUNK_HEADER) & (after <= size)
        bad = ~padded & ~sound
        if bad.any():
            stop = min(stop, int(at[bad].min()))
        found.append((live[sound], at[sound], after[sound], kind[sound]))
        pos[live] = after
        live = live[sound & (after < size)]
    if not found:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(0, np.uint8), stop
    # file order: block by block, the k-th chunk of a block after its (k-1)-th
    blocks, *columns = (np.concatenate(c) for c in zip(*found))
    count = np.bincount(blocks, minlength=len(first))
    step = np.concatenate([np.full(len(c[0]), k) for k, c in enumerate(found)])
    where = (np.cumsum(count) - count)[blocks] + step
    pos, end, kind = (np.empty_like(c) for c in columns)
    pos[where], end[where], kind[where] = columns
    keep = int(np.searchsorted(pos, stop))
    return pos[:keep], end[:keep], kind[:keep], stop


@lru_cache(maxsize=4096)
def _zeros_crc(length: int) -> int:
    """The raw CRC-32 register after ``length`` zero bytes from the standard start value."""
    return ~zlib.crc32(bytes(length)) & _U32


def _first_bad_crc(buf: np.ndarray, pos: np.ndarray,
                   end: np.ndarray) -> tuple[int, Callable[[], None]]:
    """The index of the first chunk whose CRC does not match (``len(pos)`` when all do), and
    what puts back the bytes between the chunks' data (a writable ``buf`` is patched in
    place, see below; the data of the chunks is never changed, so a caller that reads no
    chunk header of ``pos[1:]`` afterwards need not call it).

    With a zero start register and no final xor, a chunk's type byte and data leave the
    register at ``~stored ^ zeros_crc(length + 1)``; the 4 bytes of that value (little-endian)
    bring it back to zero, and zero bytes keep it there. So a stretch of chunks, each followed
    by those 4 bytes and zeros up to the next chunk's type byte, ends at the last chunk's value
    exactly when every CRC matches (a wrong one is off by a nonzero value that later chunks
    cannot cancel, short of a 2**-32 coincidence).
    """
    n = len(pos)
    if not n:
        return 0, _nothing
    stored = _view(buf, "<u4")[pos]
    sizes = end - pos - 6  # at most a block: look the few distinct ones up in a table
    table = np.zeros(BLOCK, np.uint32)
    for size in np.flatnonzero(np.bincount(sizes, minlength=BLOCK)).tolist():
        table[size] = _zeros_crc(size)
    value = ~stored ^ table[sizes]
    bounds = np.unique(np.concatenate([np.searchsorted(pos, np.arange(0, int(end[-1]), _PIECE)),
                                       [n]]))
    # what goes between chunk i and i + 1: value_i, then zeros up to chunk i + 1's type byte
    # (two zero bytes over the rest of its header, and the block's padding before it)
    after, gap = end[:-1], pos[1:] + 6 - end[:-1]
    if buf.flags.writeable:  # patch the bytes between the chunks' data in place
        u32, u16 = _view(buf, "<u4"), _view(buf, "<u2")
        padded = np.flatnonzero(gap > 6)
        pad = np.concatenate([after[padded[gap[padded] > 6 + k]] + 6 + k for k in range(7)])
        # what was there: the block's padding (saved), then chunk i + 1's CRC and length
        padding = np.concatenate([after[padded[gap[padded] > 6 + k]] + k for k in range(7)])
        saved = buf[padding]

        def restore() -> None:
            buf[padding] = saved
            u32[pos[1:]], u16[pos[1:] + 4] = stored[1:], end[1:] - pos[1:] - _CHUNK_HEADER

        u32[after], u16[after + 4], buf[pad] = value[:-1], 0, 0
        try:
            return _first_bad(bounds, lambda lo, hi: ~zlib.crc32(
                buf[int(pos[lo]) + 6:int(end[hi - 1])].data, _U32) & _U32 == int(value[hi - 1]),
                              threads=WORKERS), restore
        except BaseException:
            restore()
            raise
    patch_at = np.zeros(n, np.int64)
    np.cumsum(gap, out=patch_at[1:])
    where = np.repeat(after - patch_at[:-1], gap) + np.arange(int(patch_at[-1]))
    what = np.zeros(int(patch_at[-1]), np.uint8)
    for k in range(4):
        what[patch_at[:-1] + k] = (value[:-1] >> (8 * k)) & 0xFF
    scratch = np.empty(_PIECE + BLOCK + 16, np.uint8)

    def sound(lo: int, hi: int) -> bool:
        a, b = int(pos[lo]) + 6, int(end[hi - 1])
        piece = scratch[:b - a]
        piece[:] = buf[a:b]
        p, q = int(patch_at[lo]), int(patch_at[hi - 1])
        piece[where[p:q] - a] = what[p:q]
        return ~zlib.crc32(piece.data, _U32) & _U32 == int(value[hi - 1])

    return _first_bad(bounds, sound), _nothing


def _nothing() -> None:
    """Nothing to put back."""


def _view(buf: np.ndarray, dtype: str) -> np.ndarray:
    """``buf`` as overlapping words of ``dtype``, one starting at every byte (unaligned)."""
    width = np.dtype(dtype).itemsize
    words: np.ndarray = np.ndarray((max(buf.size - width + 1, 0),), dtype, buf, 0, (1,))
    return words


def _first_bad(bounds: np.ndarray, sound: Callable[[int, int], bool], *,
               threads: int = 1) -> int:
    """The first chunk that is not ``sound``: stretch after stretch (``bounds``; with
    ``threads``, that many at once, ``zlib`` releasing the GIL), then by halving the first
    stretch that is not."""
    stretches: list[tuple[int, int]] = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
    verdicts: Iterable[bool]
    if threads > 1 and len(stretches) > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            verdicts = list(pool.map(lambda span: sound(*span), stretches))
    else:
        verdicts = (sound(lo, hi) for lo, hi in stretches)
    for (lo, hi), fine in zip(stretches, verdicts):
        if fine:
            continue
        while hi - lo > 1:  # [lo, hi) holds a bad chunk: halve
            mid = (lo + hi) // 2
            if sound(lo, mid):
                lo = mid
            else:
                hi = mid
        return lo
    return int(bounds[-1])


def _join_in_place(blob: bytearray | mmap.mmap, parts: Pieces) -> tuple[int, int]:
    """Move a record's pieces up against its last one; the span of the joined record."""
    tail_start, end = parts[-1]
    for a, b in reversed(parts[:-1]):
        blob[tail_start - (b - a):tail_start] = blob[a:b]
        tail_start -= b - a
    return tail_start, end


def _scan(data: Buffer, full: list[int], multi: list[tuple[int, Pieces]],
          damage: list[tuple[int, str]], pos: int) -> None:
    """Walk the chunks from ``pos`` one by one: sound FULL chunks go to ``full`` (the hot loop
    does nothing else), the pieces of FIRST..LAST records to ``multi``, problems to
    ``damage``."""
    view, crc32, unpack, keep = memoryview(data), zlib.crc32, _unpack, full.append
    full_crc = _TYPE_CRC[_FULL]
    parts: Pieces = []
    start = -1  # offset of the FIRST chunk of the record being assembled
    size = len(data)
    while pos < size:
        left = BLOCK - pos % BLOCK
        if left >= _CHUNK_HEADER and pos + _CHUNK_HEADER <= size:
            crc, length, kind = unpack(data, pos)
            end = pos + _CHUNK_HEADER + length
            if kind == _FULL and start < 0 and length <= left - _CHUNK_HEADER \
                    and end <= size and crc32(view[pos + _CHUNK_HEADER:end], full_crc) == crc:
                keep(pos)
                pos = end
                continue
        elif left < _CHUNK_HEADER:
            pos += left  # zero padding at the end of a block
            continue
        else:
            damage.append((pos, f"torn chunk header ({size - pos} of 7 bytes)"))
            break
        problem = _problem(data, pos, crc, length, kind, left)
        if problem is not None:
            damage.append((pos, problem))
            if start >= 0:
                parts, start = _drop_partial(start, damage)
            if problem.startswith(("torn", "zero-filled")):
                break
            pos = end if problem.startswith("CRC") else _resync(data, pos, pos + left)
            continue
        chunk = (pos + _CHUNK_HEADER, end)
        if kind in (_FULL, _FIRST):
            if start >= 0:
                parts, start = _drop_partial(start, damage)
            if kind == _FULL:
                keep(pos)
            else:
                parts, start = [chunk], pos
        elif start < 0:
            damage.append((pos, "continuation chunk without a first chunk; skipped"))
        elif kind == _MIDDLE:
            parts.append(chunk)
        else:
            parts.append(chunk)
            multi.append((start, parts))
            parts, start = [], -1
        pos = end
    if start >= 0:
        damage.append((start, "record cut off at the end of the file"))


def _problem(data: Buffer, pos: int, crc: int, length: int, kind: int, left: int) -> str | None:
    """What is wrong with the chunk at ``pos``, or None when it is a sound FIRST/MIDDLE/LAST
    (or FULL) chunk."""
    size = len(data)
    end = pos + _CHUNK_HEADER + length
    if kind == 0 and length == 0 and crc == 0:
        rest = size - pos
        if not data[pos:].strip(b"\0"):
            return f"zero-filled tail ({rest} bytes)"
        return "zeroed chunk header; skipped to the next sound chunk"
    valid = kind in _TYPE_CRC
    fits = length <= left - _CHUNK_HEADER  # a chunk never crosses its block's end
    if valid and fits and end > size:
        return f"torn last chunk ({size - pos - _CHUNK_HEADER} of {length} bytes written)"
    if not valid or not fits:
        return f"bad chunk header (type {kind}, length {length}); skipped to the next sound chunk"
    if zlib.crc32(data[pos + _CHUNK_HEADER:end], _TYPE_CRC[kind]) != crc:
        return "CRC mismatch; chunk skipped"
    return None


def _resync(data: Buffer, pos: int, block_end: int) -> int:
    """The first offset after ``pos`` in its block where a sound chunk starts (a valid type, a
    length inside the block, a matching CRC), else the block's end: what a damaged header
    hides of its block is read again."""
    limit = min(block_end, len(data)) - _CHUNK_HEADER
    for at in range(pos + 1, limit + 1):
        crc, length, kind = _unpack(data, at)
        end = at + _CHUNK_HEADER + length
        if kind in _TYPE_CRC and end <= block_end and end <= len(data) and length \
                and zlib.crc32(data[at + _CHUNK_HEADER:end], _TYPE_CRC[kind]) == crc:
            return at
    return block_end


def _drop_partial(start: int, damage: list[tuple[int, str]]) -> tuple[Pieces, int]:
    """Forget a record whose FIRST chunk was seen but whose LAST never came."""
    damage.append((start, "record without its last chunk; dropped"))
    return [], -1


def _describe_header(head: bytes | bytearray) -> str:
    if head[:4] == HEADER[:4]:
        return f"unsupported .wandb header {head.hex(' ')} (expected {HEADER.hex(' ')})"
    return f"no .wandb header (file starts with {head.hex(' ') or 'nothing'})"
