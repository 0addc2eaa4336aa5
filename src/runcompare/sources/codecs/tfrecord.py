"""TFRecord framing with masked CRC-32C checks, batched over a whole file.

A TFRecord file is a chain of records, little-endian::

    u64 length | u32 masked_crc32c(length bytes) | data[length] | u32 masked_crc32c(data)

with ``masked(c) = ((c >> 15 | c << 17) + 0xA282EAD8) mod 2**32``.

Framing is sequential by nature (each length says where the next record starts), so
:func:`frame` follows it speculatively: it walks a few records one by one, and once their
lengths repeat with some period (scalar logs repeat the same tags in the same order), it
predicts the offsets of the next thousands of records at once and keeps the prefix whose
lengths numpy confirms.

Checking two CRCs per record one call at a time would cost more than decoding. CRC-32C is
linear, so all records of a chain are checked with one pass of ``google_crc32c``: with a zero
initial register and no final xor (``crc0``), a block followed by its own ``crc0`` has
``crc0 == 0``, and a chain of such blocks does too. Each stored CRC is converted to ``crc0``
(unmask, then xor the CRC of as many zero bytes), written into a copy of the chain, and the
copy must give zero. A single damaged block always breaks the total; only when it is broken
are the records split in halves to find which ones are bad. A record whose data CRC fails is
skipped; one whose length CRC fails ends the chain, and the reader looks for the next valid
header (garbage in the middle of a file). A last record cut short is normal for a run that is
still writing or was killed: reading stops there and a finding says so. Without the
``google_crc32c`` wheel, every record's CRCs are computed with numpy instead (same results,
slower).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from . import crc as crc32c

try:
    from . import _wire  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler: numpy and google_crc32c check the chains
    _wire = None

__all__ = ["NATIVE", "Damage", "Frames", "frame", "masked_crc32c"]

#: Whether chains are followed and checked in C (built, with the CPU's CRC-32C instruction,
#: and not turned off with ``RUNCOMPARE_PURE=1``).
NATIVE = (_wire is not None and bool(_wire.FAST_CRC)
          and os.environ.get("RUNCOMPARE_PURE", "") in ("", "0"))

HEADER = 12
FOOTER = 4
_U32 = crc32c.U32
#: Records predicted per speculative step (bounds the memory of one step).
_SPECULATE = 1 << 18
#: Bytes scanned per step when looking for a valid header after garbage.
_SCAN = 1 << 20
#: Bytes per copy when checking a chain's CRCs.
_CHUNK = 8 << 20
#: A declared length above this is garbage, not a record (TensorBoard caps events far lower).
_MAX_RECORD = 1 << 40


@dataclass(frozen=True)
class Damage:
    """A stretch of a file that could not be read: byte ``offset`` and what was wrong."""

    offset: int
    reason: str


@dataclass
class Frames:
    """The complete, CRC-checked records of one file: data offsets and lengths, in file order."""

    starts: np.ndarray
    lengths: np.ndarray
    damage: list[Damage] = field(default_factory=list)


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data``.

    >>> hex(masked_crc32c(b"123456789"))
    '0xc78ab0e5'
    """
    return crc32c.masked_crc32c(data)


def frame(buf: np.ndarray) -> Frames:
    """Frame and check every record of a file's bytes ``buf`` (uint8).

    Never raises on bad bytes: what cannot be read is listed in :attr:`Frames.damage`.
    """
    n = buf.size
    pos: int | None = 0
    starts: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    damage: list[Damage] = []
    while pos is not None and pos < n:
        heads, lens, good, stop, garbage = _checked_chain(buf, pos)
        damage += [Damage(int(h), "CRC mismatch in a record's data; record skipped")
                   for h in heads[~good]]
        everything = bool(good.all())
        starts.append((heads if everything else heads[good]) + HEADER)
        lengths.append(lens if everything else lens[good])
        if garbage is None:
            garbage = _tail(buf, stop, damage)
            if garbage is None:
                break
        pos = _resync(buf, garbage + 1)
        skipped = (n if pos is None else pos) - garbage
        damage.append(Damage(garbage, f"{skipped} bytes of garbage (no valid record header); "
                                      "skipped to the next record"))
    return Frames(_join(starts), _join(lengths), damage)


def _checked_chain(buf: np.ndarray, pos: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int | None]:
    """:func:`_chain` then :func:`_verify`: the records from ``pos`` before the first bad
    header, their lengths, which hold their data CRC, where the records stopped fitting in
    the file, and the first bad header (None if none). In C, record after record, when the
    extension is built: the same results as :func:`_verify_spans`."""
    if NATIVE and buf.dtype == np.uint8 and buf.flags.c_contiguous:
        assert _wire is not None
        heads, lens, good, stop, garbage = _wire.chain(buf, pos)
        return (np.frombuffer(heads, np.int64), np.frombuffer(lens, np.int64),
                np.frombuffer(good, bool), stop, None if garbage < 0 else garbage)
    heads, lens, stop = _chain(buf, pos)
    heads, lens, good, bad_header = _verify(buf, heads, lens)
    return heads, lens, good, stop, bad_header


def _join(pieces: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(pieces) if pieces else np.empty(0, np.int64)


def _tail(buf: np.ndarray, stop: int, damage: list[Damage]) -> int | None:
    """Classify where a chain stopped: end of file, a cut-short last record, or garbage.

    Returns the offset of garbage to skip, or None when reading is over.
    """
    n = buf.size
    if stop >= n:
        return None
    if n - stop < HEADER:
        damage.append(Damage(stop, f"truncated last record ({n - stop} bytes of its 12-byte "
                                   "header; the run may still be writing or was killed)"))
        return None
    if _header_ok(buf, stop):
        length = int(_u64(buf, np.array([stop]))[0])
        damage.append(Damage(stop, f"truncated last record ({n - stop - HEADER} of its "
                                   f"{length + FOOTER} bytes after the header; the run may "
                                   "still be writing or was killed)"))
        return None
    return stop


# -- the chain of record offsets -----------------------------------------------------------

def _chain(buf: np.ndarray, pos: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Header offsets and lengths of the records that follow each other from ``pos``.

    Stops before a record that does not fit in the file; returns that offset too (the file's
    size when the chain ended cleanly).
    """
    n = buf.size
    heads: list[np.ndarray] = []
    lens: list[np.ndarray] = []
    probe = 64
    while pos + HEADER <= n:
        walked, walked_lens, pos = _walk(buf, pos, probe)
        heads.append(walked)
        lens.append(walked_lens)
        if walked.size < probe:
            break
        period = _period(walked_lens)
        if period:
            predicted, predicted_lens, pos = _speculate(buf, pos, walked_lens[-period:])
            heads.append(predicted)
            lens.append(predicted_lens)
        else:
            probe = min(probe * 2, 4096)
    return _join(heads), _join(lens), pos


def _walk(buf: np.ndarray, pos: int, count: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Follow up to ``count`` records one by one; stop before one that does not fit."""
    n = buf.size
    raw = buf.data
    heads: list[int] = []
    lens: list[int] = []
    unpack = struct.Struct("<Q").unpack_from
    while len(heads) < count and pos + HEADER <= n:
        (length,) = unpack(raw, pos)
        if length > n - pos - HEADER - FOOTER:
            break
        heads.append(pos)
        lens.append(length)
        pos += length + HEADER + FOOTER
    return np.array(heads, np.int64), np.array(lens, np.int64), pos


def _period(lens: np.ndarray) -> int:
    """The shortest period with which ``lens`` repeats at least twice (0 if none)."""
    for period in range(1, lens.size // 2 + 1):
        if np.array_equal(lens[period:], lens[:-period]):
            return period
    return 0


def _speculate(buf: np.ndarray, pos: int,
               pattern: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Predict that record lengths keep repeating ``pattern``; keep the prefix that holds.

    Predicts a few cycles first and twice as many each time all of them hold, so a wrong
    guess costs little. Returns the confirmed header offsets, their lengths and the offset
    after them.
    """
    n = buf.size
    sizes = pattern + HEADER + FOOTER
    cycle = int(sizes.sum())
    offsets = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    heads: list[np.ndarray] = []
    lens: list[np.ndarray] = []
    wanted = max(1, 256 // pattern.size)
    while True:
        cycles = min((n - pos) // cycle, wanted)
        if cycles == 0:
            break
        guess = (pos + cycle * np.arange(cycles, dtype=np.int64)[:, None] + offsets).ravel()
        ok = (_u64(buf, guess).reshape(cycles, -1) == pattern.astype(np.uint64)).ravel()
        bad = int(np.argmin(ok)) if not ok.all() else guess.size
        heads.append(guess[:bad])
        lens.append(np.tile(pattern, cycles)[:bad])
        if bad < guess.size:
            pos = int(guess[bad])
            break
        pos += cycles * cycle
        wanted = min(wanted * 2, max(1, _SPECULATE // pattern.size))
    return _join(heads), _join(lens), pos


def read_at(buf: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
    """Little-endian values of ``dtype`` (``"<u8"``, ``"<f4"``, ...) read at byte offsets ``at``.

    Each offset must leave room for the value inside ``buf``.

    >>> read_at(np.arange(10, dtype=np.uint8), np.array([1, 5]), "<u2").tolist()
    [513, 1541]
    """
    size = np.dtype(dtype).itemsize
    if at.size == 0 or buf.size < size:
        return np.empty(0, dtype)
    view = np.ndarray((buf.size - size + 1,), dtype, buffer=buf, strides=(1,))
    values: np.ndarray = view[at]
    return values


def _u64(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    return read_at(buf, at, "<u8")


def _u32(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    return read_at(buf, at, "<u4")


# -- CRC checks ----------------------------------------------------------------------------

def _verify(buf: np.ndarray, heads: np.ndarray, lens: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int | None]:
    """Check the CRCs of a chain of records.

    Returns the records before the first one whose length CRC fails (the chain is garbage from
    there on), their lengths, a mask of those whose data CRC holds, and the offset of that
    first bad header (None if there is none).
    """
    if not crc32c.fast():
        return _verify_spans(buf, heads, lens)
    good = np.ones(heads.size, bool)
    stack = [(lo, min(lo + _SPECULATE, heads.size))  # checked in order, a bounded slice at a time
             for lo in range(0, heads.size, _SPECULATE)][::-1]
    while stack:
        lo, hi = stack.pop()
        if _chain_crc(buf, heads[lo:hi], lens[lo:hi]) == 0:
            continue
        if hi - lo > 1:
            mid = (lo + hi) // 2
            stack += [(mid, hi), (lo, mid)]  # the left half is checked first
            continue
        if not _header_ok(buf, int(heads[lo])):
            return heads[:lo], lens[:lo], good[:lo], int(heads[lo])
        good[lo] = False
    return heads, lens, good, None


def _verify_spans(buf: np.ndarray, heads: np.ndarray, lens: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int | None]:
    """:func:`_verify` without the C CRC: every record's two CRCs computed with numpy."""
    head_ok = crc32c.masked_rows(_u64(buf, heads).view(np.uint8).reshape(-1, 8)) == _u32(
        buf, heads + 8)
    data = crc32c.span_crcs(buf, heads + HEADER, lens)
    good = crc32c.mask_array(data) == _u32(buf, heads + HEADER + lens)
    if head_ok.all():
        return heads, lens, good, None
    first = int(np.argmin(head_ok))
    return heads[:first], lens[:first], good[:first], int(heads[first])


def _header_ok(buf: np.ndarray, at: int) -> bool:
    stored = int.from_bytes(buf[at + 8:at + HEADER].tobytes(), "little")
    return masked_crc32c(buf[at:at + 8].tobytes()) == stored


def _chain_crc(buf: np.ndarray, heads: np.ndarray, lens: np.ndarray) -> int:
    """``crc0`` of the contiguous records ``heads`` with each stored CRC turned into crc0.

    Zero when every length and data CRC holds.
    """
    fields = np.column_stack((heads + 8, heads + HEADER + lens)).ravel()
    zeros = np.column_stack((np.full(heads.size, _zeros_crc(8), np.uint32), _zeros_crcs(lens)))
    values = (crc32c.unmask(_u32(buf, fields)) ^ zeros.ravel()).astype("<u4")
    values = values.view(np.uint8).reshape(-1, 4)
    state = _U32  # google_crc32c's running value for a zero register
    begin, last = int(heads[0]), int(heads[-1] + lens[-1] + HEADER + FOOTER)
    while begin < last:
        stop = min(begin + _CHUNK, last)
        split = int(np.searchsorted(fields, stop - 3))
        if split < fields.size and fields[split] < stop:
            stop = int(fields[split])  # never cut a stored CRC in two
        piece = buf[begin:stop].copy()
        lo, hi = np.searchsorted(fields, [begin, stop])
        windows = np.lib.stride_tricks.as_strided(piece, (piece.size - 3, 4), (1, 1))
        windows[fields[lo:hi] - begin] = values[lo:hi]
        state = crc32c.extend(state, piece.tobytes())
        begin = stop
    return state ^ _U32


@lru_cache(maxsize=4096)
def _zeros_crc(length: int) -> int:
    """CRC-32C of ``length`` zero bytes: what separates a standard CRC from crc0."""
    return crc32c.value(bytes(length))


def _zeros_crcs(lens: np.ndarray) -> np.ndarray:
    """:func:`_zeros_crc` of each length (records of a log share a few lengths)."""
    low, high = int(lens.min()), int(lens.max())
    if high - low > 1 << 16:
        unique, inverse = np.unique(lens, return_inverse=True)
        crcs: np.ndarray = np.array([_zeros_crc(int(n)) for n in unique], np.uint32)[inverse]
        return crcs
    table = np.zeros(high - low + 1, np.uint32)
    for offset in np.flatnonzero(np.bincount(lens - low)):
        table[offset] = _zeros_crc(low + int(offset))
    crcs = table[lens - low]
    return crcs


# -- resynchronising after garbage ---------------------------------------------------------

def _resync(buf: np.ndarray, pos: int) -> int | None:
    """The first offset at or after ``pos`` holding a header whose CRC holds, or None."""
    n = buf.size
    while pos + HEADER <= n:
        stop = min(pos + _SCAN, n - HEADER + 1)
        at = np.arange(pos, stop, dtype=np.int64)
        length = _u64(buf, at)
        at = at[(length > 0) & (length < _MAX_RECORD)]  # events are never empty
        if at.size:
            rows = _u64(buf, at).view(np.uint8).reshape(-1, 8)
            hit = np.flatnonzero(crc32c.masked_rows(rows) == _u32(buf, at + 8))
            if hit.size:
                return int(at[hit[0]])
        pos = stop
    return None
