"""Texts inside a file's bytes as polars String series, without a Python loop per text.

The W&B history decoder finds millions of keys and values as ``(at, size)`` spans of the file;
these become Arrow string views into the file's bytes (16 bytes each: the length, then the
text inline when it fits in 12 bytes, else a 4-byte prefix and its offset). Texts of up to
32 bytes are read whole as 8-byte words, a stretch of spans at a time while their bytes are in
the CPU cache: when they are all ASCII, no UTF-8 check is needed; otherwise polars checks the
UTF-8, and invalid UTF-8 falls back to a per-text decode with replacement characters. Equal
keys are pointed at one copy, which keeps later comparisons of them in the cache.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from .files import Buffer

__all__ = ["CHUNK", "string_columns"]

#: Items (or texts) handled per step of the loops that read them from the file's bytes.
CHUNK = 1 << 15
#: Masks keeping the first k bytes of a little-endian word.
_MASK8 = np.array([(1 << 8 * k) - 1 for k in range(9)], np.uint64)
_HIGH_BITS = np.uint64(0x8080808080808080)
#: Texts up to this long are read whole with four 8-byte gathers (ASCII checked, keys merged).
_WORDS = 32


def string_columns(blob: Buffer, buf: np.ndarray,
                    spans: list[tuple[np.ndarray, np.ndarray]]) -> list[pl.Series]:
    """:func:`_strings` of several columns of texts ``(at, size)`` of the same items (the first
    one merged), reading each stretch of items once for all columns."""
    n = len(spans[0][0])
    if not n or len(buf) < 24 or any((at > len(buf) - 24).any() for at, _ in spans):
        return [_strings(blob, buf, at, size, merge=not i) for i, (at, size) in enumerate(spans)]
    u64 = np.ndarray((len(buf) - 7,), "<u8", buf, 0, (1,))
    words = [np.zeros((4, n), np.uint64) for _ in spans]
    for lo in range(0, n, CHUNK):
        for (at, size), out in zip(spans, words):
            _read_words(u64, at[lo:lo + CHUNK], size[lo:lo + CHUNK], out[:, lo:lo + CHUNK])
    return [_series(blob, at, size, out, merge=not i)
            for i, ((at, size), out) in enumerate(zip(spans, words))]


def _read_words(u64: np.ndarray, at: np.ndarray, size: np.ndarray, out: np.ndarray) -> None:
    """Bytes 0..7 and 8..15 of each text, and for texts of 17..32 bytes the last 8 and bytes
    16..23, as little-endian words (zero past the text)."""
    out[0] = u64[at] & _MASK8[np.minimum(size, 8)]
    out[1] = u64[at + 8] & _MASK8[np.clip(size - 8, 0, 8)]
    mid = np.flatnonzero((size > 16) & (size <= _WORDS))
    if mid.size:
        out[2, mid] = u64[at[mid] + size[mid] - 8]
        over = mid[size[mid] > 24]
        out[3, over] = u64[at[over] + 16]


def _series(blob: Buffer, at: np.ndarray, size: np.ndarray, words: np.ndarray, *,
            merge: bool) -> pl.Series:
    """The String series of the texts ``blob[at:at+size]`` read whole as ``words``."""
    n = len(at)
    views = np.empty((n, 4), np.uint32)
    views[:, 0] = size
    views[:, 1:3] = words[0].view(np.uint32).reshape(n, 2)
    views[:, 3] = words[1]  # the low half: bytes 8..11
    ascii_ = not (size > _WORDS).any() and not (
        np.bitwise_or.reduce(words, axis=None) & _HIGH_BITS)
    longer = np.flatnonzero(size > 12)
    if len(longer) == n:  # every text (values mostly are): no need to pick them
        views[:, 2], views[:, 3] = 0, at
    else:
        views[longer, 2] = 0
        views[longer, 3] = at[longer]
    if merge:
        _merge(views, longer[size[longer] <= _WORDS], words, size, at)
    return _from_views(blob, at, size, views, ascii_)


def _from_views(blob: Buffer, at: np.ndarray, size: np.ndarray, views: np.ndarray,
                ascii_: bool) -> pl.Series:
    """A String series of Arrow views into ``blob``: as strings when the texts are known to
    be ASCII, else as binary that polars checks for UTF-8 (per-text decode if invalid)."""
    import pyarrow as pa  # here, not at import: only W&B histories need it

    kind = pa.string_view() if ascii_ else pa.binary_view()
    array = pa.Array.from_buffers(kind, len(at), [None, pa.py_buffer(views), pa.py_buffer(blob)])
    try:
        texts: pl.Series = pl.Series(pl.from_arrow(array)).cast(pl.String)
        return texts
    except pl.exceptions.PolarsError:
        return pl.Series([bytes(blob[a:a + s]).decode("utf-8", errors="replace")
                          for a, s in zip(at.tolist(), size.tolist())], dtype=pl.String)


def _strings(blob: Buffer, buf: np.ndarray, at: np.ndarray, size: np.ndarray,
             *, merge: bool = False) -> pl.Series:
    """The UTF-8 texts ``blob[at:at+size]`` as a polars String series, without a Python loop.

    Builds Arrow string views (16 bytes each: length, then the text inline when it fits in 12
    bytes, else a 4-byte prefix and the offset into ``blob``). Texts of up to 32 bytes are
    read whole as 8-byte words: when they are all ASCII, no UTF-8 check is needed; otherwise
    polars checks the UTF-8 (as binary views cast to strings), and invalid UTF-8 falls back to
    a per-text decode with replacement characters. With ``merge``, the views of equal texts
    (keys repeat in every record) point at one copy, which keeps later comparisons of them in
    the CPU cache.
    """
    n = len(at)
    if n == 0:
        return pl.Series([], dtype=pl.String)
    # a view is four little-endian u32: length, then 12 inline bytes (zero padded), or a
    # 4-byte prefix, buffer 0 and the offset into ``blob`` for longer texts
    views = np.empty((n, 4), np.uint32)
    views[:, 0] = size
    near_end = at > len(buf) - 24  # read one by one (the last bytes of ``blob``)
    whole = len(buf) >= 24 and not near_end.any()
    u64 = np.ndarray((max(len(buf) - 7, 0),), "<u8", buf, 0, (1,))
    safe = np.where(near_end, 0, at)
    # bytes 0..7 and 8..15, then for longer texts the last 8 and bytes 16..23
    words = np.zeros((4, n), np.uint64)
    if len(buf) >= 24:
        words[0], words[1] = u64[safe], u64[safe + 8]
    words[0] &= _MASK8[np.minimum(size, 8)]
    words[1] &= _MASK8[np.clip(size - 8, 0, 8)]
    views[:, 1:3] = words[0].view(np.uint32).reshape(n, 2)
    views[:, 3] = words[1]  # the low half: bytes 8..11
    for i in np.flatnonzero(near_end).tolist():
        text = bytes(blob[at[i]:at[i] + min(int(size[i]), 12)]).ljust(12, b"\0")
        views[i, 1:] = np.frombuffer(text, "<u4")
    mid = np.flatnonzero((size > 16) & (size <= _WORDS)) if whole else np.zeros(0, np.int64)
    if mid.size:
        words[2, mid] = u64[at[mid] + size[mid] - 8]
        over = mid[size[mid] > 24]
        words[3, over] = u64[at[over] + 16]
    ascii_ = whole and not (size > _WORDS).any() and not (
        np.bitwise_or.reduce(words, axis=0) & _HIGH_BITS).any()
    longer = np.flatnonzero(size > 12)
    views[longer, 2] = 0
    views[longer, 3] = at[longer]
    if merge and whole:
        _merge(views, longer[size[longer] <= _WORDS], words, size, at)
    return _from_views(blob, at, size, views, ascii_)


def _merge(views: np.ndarray, rows: np.ndarray, words: np.ndarray, size: np.ndarray,
           at: np.ndarray) -> None:
    """Point the views ``rows`` (texts of 13..32 bytes, read whole as ``words``) of equal
    texts at one of them: a hash table of one entry per bucket, checked exactly."""
    if not rows.size:
        return
    if len(rows) == len(size):  # every text: no need to pick them
        key = [*words, size.astype(np.uint64)]
    else:
        key = [words[0][rows], words[1][rows], words[2][rows], words[3][rows],
               size[rows].astype(np.uint64)]
    mixed = key[4].copy()
    for part, odd in zip(key, (0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                               0x27D4EB2F165667C5)):
        mixed ^= part * np.uint64(odd)
    bucket = (mixed * np.uint64(0x94D049BB133111EB) >> np.uint64(48)).astype(np.int64)
    table = np.empty(1 << 16, np.int64)
    table[bucket] = np.arange(len(rows))
    first = table[bucket]
    same = key[0][first] == key[0]
    for part in key[1:]:
        same &= part[first] == part
    views[rows[same], 3] = at[rows[first[same]]]
