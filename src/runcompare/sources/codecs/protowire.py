"""Columnar protobuf decoding: one message type parsed for many records at once with numpy.

Protobuf's wire format is a sequence of ``key | payload`` fields, ``key = field << 3 | wire
type``. :func:`walk` reads the n-th field of every message in one vectorised step, so a file
of a million similar messages costs a few passes of numpy over a million lanes rather than a
million Python calls. Lanes whose bytes break the wire format are flagged ``bad``; the caller
decides what to do with them (TensorBoard's reader reports them as damaged).

Only what event files need is here: varints, fixed 32/64-bit fields, length-delimited fields
(kept as byte spans), and one repeated message field per walk returned as rows. Beside it, the
same wire format one message at a time in Python (:func:`varint_at`, :func:`fields`,
:func:`skip_field`), for small messages of many kinds (W&B's run, config and summary records),
which raise :class:`ProtoError` on malformed bytes.

Wire format: a field is a varint key ``number << 3 | wire_type`` then a value: varint (type 0),
8 bytes (1), length-prefixed bytes (2) or 4 bytes (5).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from .tfrecord import read_at

try:
    from . import _wire  # type: ignore[attr-defined]
except ImportError:  # built without a C compiler: numpy walks every message
    _wire = None

__all__ = ["NATIVE", "Column", "ProtoError", "Walk", "fields", "group_spans", "skip_field",
           "varint", "varint_at", "walk"]

#: Whether :func:`walk` runs in C (built, and not turned off with ``RUNCOMPARE_PURE=1``).
NATIVE = _wire is not None and os.environ.get("RUNCOMPARE_PURE", "") in ("", "0")

_WIDTH = {1: 8, 5: 4}
#: Field numbers the C walker takes (any key's number is below 2**61).
_MAX_NUMBER = 1 << 61


class Column:
    """One field of every lane (the last occurrence wins, as in protobuf).

    ``wire`` is -1 where the field is absent; ``a`` holds a varint's value (wire 0), a fixed
    value's offset (wire 1, 5) or a payload's offset (wire 2); ``b`` the payload's length;
    ``repeated`` marks lanes where the field occurred more than once. Arrays are allocated
    when the field first occurs, so fields that never do cost nothing.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._wire: np.ndarray | None = None
        self._a: np.ndarray | None = None
        self._b: np.ndarray | None = None
        self._repeated: np.ndarray | None = None

    @property
    def wire(self) -> np.ndarray:
        if self._wire is None:
            self._wire = np.full(self.size, -1, np.int8)
        return self._wire

    @property
    def a(self) -> np.ndarray:
        if self._a is None:
            self._a = np.zeros(self.size, np.int64)
        return self._a

    @property
    def b(self) -> np.ndarray:
        if self._b is None:
            self._b = np.zeros(self.size, np.int64)
        return self._b

    @property
    def repeated(self) -> np.ndarray:
        if self._repeated is None:
            self._repeated = np.zeros(self.size, bool)
        return self._repeated

    def has(self, wire: int) -> np.ndarray:
        """Lanes where the field occurred (last) with this wire type."""
        if self._wire is None:
            return np.zeros(self.size, bool)
        found: np.ndarray = self._wire == wire
        return found


@dataclass
class Walk:
    """What :func:`walk` found: one :class:`Column` per field asked for, bad lanes, and the
    rows of the repeated field (lane, payload offset, payload length) in message order."""

    fields: dict[int, Column]
    bad: np.ndarray
    rows: tuple[np.ndarray, np.ndarray, np.ndarray]


def varint(buf: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode the varint at each offset: values (uint64) and the offsets after them.

    A varint longer than 10 bytes or running past ``buf`` ends past ``buf``.

    >>> buf = np.frombuffer(bytes([0x96, 0x01, 0x05]), np.uint8)
    >>> [x.tolist() for x in varint(buf, np.array([0, 2]))]
    [[150, 5], [2, 3]]
    """
    last = buf.size - 1
    inside = at.size == 0 or int(at.max()) <= last
    byte = buf[at] if inside else buf[np.minimum(at, last)]
    if inside and (at.size == 0 or int(byte.max()) < 0x80):
        return byte.astype(np.uint64), at + 1
    value = (byte & 0x7F).astype(np.uint64)
    after = at + 1
    more = np.flatnonzero(byte >= 0x80)
    shift = 7
    while more.size and shift < 70:
        byte = buf[np.minimum(after[more], last)]
        value[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[more] += 1
        more = more[byte >= 0x80]
        shift += 7
    after[more] = buf.size + 1
    after[after > buf.size] = buf.size + 1
    return value, after


def walk(buf: np.ndarray, start: np.ndarray, end: np.ndarray, fields: set[int],
         *, repeated: int | None = None) -> Walk:
    """Parse the messages ``buf[start:end]`` field by field, all lanes at once.

    ``fields`` are the field numbers to keep (as :class:`Column`); ``repeated`` is one more
    field number whose every occurrence (a message) is returned in :attr:`Walk.rows`. Other
    fields are skipped. A lane with a malformed field is marked bad and stops there (the
    values of that field already stored).

    Runs in C (``_wire.c``, the same results) when the extension is built; numpy otherwise.
    """
    if NATIVE:
        found = _walk_native(buf, start, end, fields, repeated)
        if found is not None:
            return found
    return _walk_numpy(buf, start, end, fields, repeated)


def _walk_native(buf: np.ndarray, start: np.ndarray, end: np.ndarray, fields: set[int],
                 repeated: int | None) -> Walk | None:
    """:func:`walk` in C; None for what only numpy takes (other dtypes, lanes past ``buf``)."""
    numbers = tuple(fields)
    if not (buf.dtype == np.uint8 and buf.ndim == 1 and buf.flags.c_contiguous
            and start.ndim == 1 and start.shape == end.shape and len(numbers) <= 64
            and np.can_cast(start.dtype, np.int64) and np.can_cast(end.dtype, np.int64)
            and all(type(n) is int and 0 <= n < _MAX_NUMBER for n in numbers)
            and (repeated is None or type(repeated) is int and 0 <= repeated < _MAX_NUMBER)):
        return None
    assert _wire is not None
    found = _wire.walk(buf, np.ascontiguousarray(start, np.int64),
                       np.ascontiguousarray(end, np.int64), numbers,
                       -1 if repeated is None else repeated)
    if found is None:
        return None
    bad, columns, lanes, starts, lengths = found
    size = start.size
    out = {}
    for number, arrays in zip(numbers, columns):
        column = out[number] = Column(size)
        if arrays is not None:
            wire, a, b, again = arrays
            column._wire = np.frombuffer(wire, np.int8)
            column._a = np.frombuffer(a, np.int64)
            column._b = None if b is None else np.frombuffer(b, np.int64)
            column._repeated = None if again is None else np.frombuffer(again, bool)
    return Walk(out, np.frombuffer(bad, bool), (np.frombuffer(lanes, np.int64),
                                                np.frombuffer(starts, np.int64),
                                                np.frombuffer(lengths, np.int64)))


def _walk_numpy(buf: np.ndarray, start: np.ndarray, end: np.ndarray, fields: set[int],
                repeated: int | None) -> Walk:
    size = start.size
    state = _State(buf, {number: Column(size) for number in fields}, repeated, size)
    pos = start.astype(np.int64, copy=True)
    lanes: np.ndarray | slice = slice(None) if bool((pos < end).all()) else np.flatnonzero(
        pos < end)
    while _count(lanes, size):
        here, stop = pos[lanes], end[lanes]
        key = buf[here]
        nxt = np.empty_like(here)
        for wire_key, sel in _groups(key):
            index = _index(lanes, sel, size)
            if wire_key >= 0x80:  # a key of several bytes (field 16 and up): rare
                nxt[sel] = _long_keys(state, index, here[sel])
            else:
                nxt[sel] = state.field(wire_key, index, here[sel] + 1)
        broken = (nxt > stop) | (nxt <= here)
        going = nxt < stop
        if broken.any():
            state.bad[_index(lanes, np.flatnonzero(broken), size)] = True
            going &= ~broken  # a field that does not advance would be read again and again
        pos[lanes] = nxt
        lanes = lanes if going.all() else _index(lanes, np.flatnonzero(going), size)
    return Walk(state.columns, state.bad, _rows(state.rows, size))


@dataclass
class _State:
    """The columns, bad lanes and repeated rows a :func:`walk` is filling in."""

    buf: np.ndarray
    columns: dict[int, Column]
    repeated: int | None
    size: int

    def __post_init__(self) -> None:
        self.bad = np.zeros(self.size, bool)
        self.rows: list[tuple[np.ndarray | None, np.ndarray, np.ndarray]] = []
        self.seen: set[int] = set()

    def field(self, key: int, lanes: np.ndarray | slice, at: np.ndarray) -> np.ndarray:
        """Read the field with ``key`` at ``at`` for ``lanes``; return where it ends.

        A field that cannot be skipped (field 0, groups, wire types 6 and 7) ends past any
        message, which marks its lane bad.
        """
        buf, number, wire = self.buf, key >> 3, key & 7
        if number == 0 or wire not in (0, 1, 2, 5):
            return np.full(at.size, buf.size + 1, np.int64)
        column = self.columns.get(number)
        if column is not None:
            if number in self.seen and column._wire is not None:
                again = column.wire[lanes] >= 0
                if again.any():
                    column.repeated[lanes] |= again
            self.seen.add(number)
            column.wire[lanes] = wire
        if wire in _WIDTH:
            if column is not None:
                column.a[lanes] = at
            return at + _WIDTH[wire]
        value, after = varint(buf, at)
        if wire == 0:
            if column is not None:
                column.a[lanes] = value.view(np.int64)
            return after
        length = value.view(np.int64)  # a length past 2**63 turns negative: caught as bad
        if number == self.repeated:
            self.rows.append((None if isinstance(lanes, slice) else lanes, after, length))
        if column is not None:
            column.a[lanes] = after
            column.b[lanes] = length
        return after + length


def _long_keys(state: _State, lanes: np.ndarray | slice, here: np.ndarray) -> np.ndarray:
    keys, after = varint(state.buf, here)
    nxt = np.empty_like(here)
    for key in np.unique(keys):
        sel = np.flatnonzero(keys == key)
        index = np.arange(state.size)[lanes][sel]
        nxt[sel] = state.field(int(key), index, after[sel])
    return nxt


def _groups(key: np.ndarray) -> list[tuple[int, slice | np.ndarray]]:
    """The distinct keys and the lanes holding each (all lanes as a slice when uniform)."""
    first = int(key[0])
    if key[-1] == first and (key == first).all():
        return [(first, slice(None))]
    return [(int(k), np.flatnonzero(key == k))
            for k in np.flatnonzero(np.bincount(key, minlength=1))]


def _count(lanes: np.ndarray | slice, size: int) -> int:
    return size if isinstance(lanes, slice) else lanes.size


def _index(lanes: np.ndarray | slice, sel: np.ndarray | slice,
           size: int) -> np.ndarray | slice:
    """``lanes[sel]``, keeping "all lanes" as a slice so that stores need no scatter."""
    if isinstance(sel, slice):
        return lanes
    if isinstance(lanes, slice):
        return sel
    picked: np.ndarray = lanes[sel]
    return picked


def _rows(rows: list[tuple[np.ndarray | None, np.ndarray, np.ndarray]],
          size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The repeated field's occurrences ordered by lane, then by position in the message."""
    if not rows:
        empty = np.empty(0, np.int64)
        return empty, empty, empty
    parts = [(np.arange(size) if lanes is None else lanes, start, length)
             for lanes, start, length in rows]
    if len(parts) == 1:
        return parts[0]
    lanes = np.concatenate([p[0] for p in parts])
    start = np.concatenate([p[1] for p in parts])
    length = np.concatenate([p[2] for p in parts])
    order = np.lexsort((start, lanes))
    return lanes[order], start[order], length[order]


def group_spans(buf: np.ndarray, start: np.ndarray,
                length: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """Factorise byte strings given as spans of ``buf``: a code per span and the distinct
    strings, in order of first appearance. Exact (every span is compared with its group's
    first member), and vectorised: spans are read 8 bytes at a time and hashed (in C, with a
    hash table, when the extension is built).

    >>> buf = np.frombuffer(b"lossaccloss", np.uint8)
    >>> codes, uniques = group_spans(buf, np.array([0, 4, 7]), np.array([4, 3, 4]))
    >>> codes.tolist(), uniques
    ([0, 1, 0], [b'loss', b'acc'])
    """
    if start.size == 0:
        return np.empty(0, np.uint32), []
    if NATIVE and buf.dtype == np.uint8 and buf.ndim == 1 and buf.flags.c_contiguous:
        assert _wire is not None
        found = _wire.group(buf, np.ascontiguousarray(start, np.int64),
                            np.ascontiguousarray(length, np.int64))
        if found is not None:  # None: a span outside buf, which numpy reads as zeros
            codes, first = np.frombuffer(found[0], np.uint32), np.frombuffer(found[1], np.int64)
            return codes, [buf[s:s + n].tobytes() for s, n in zip(start[first].tolist(),
                                                                   length[first].tolist())]
    return _group_numpy(buf, start, length)


def _group_numpy(buf: np.ndarray, start: np.ndarray,
                 length: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    words = _words(buf, start, length)
    hashed = length.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    for word in words:
        hashed = (hashed ^ word) * np.uint64(0xBF58476D1CE4E5B9)
        hashed ^= hashed >> np.uint64(31)
    if hashed.size < 1 << 16:
        _, first_seen = np.unique(hashed, return_index=True)
        distinct = hashed[np.sort(first_seen)]
    else:
        distinct = pl.Series(hashed, dtype=pl.UInt64).unique(maintain_order=True).to_numpy()
    codes = _factorize(hashed, distinct)
    first = np.full(distinct.size, -1, np.int64)
    first[codes[::-1]] = np.arange(codes.size - 1, -1, -1)
    same = length == length[first][codes]
    for word in words:
        same &= word == word[first][codes]
    if not same.all():  # a hash collision: fall back to exact grouping in Python
        return _group_slow(buf, start, length)
    uniques = [buf[s:s + n].tobytes() for s, n in zip(start[first].tolist(),
                                                       length[first].tolist())]
    return codes.astype(np.uint32), uniques


def _factorize(hashed: np.ndarray, distinct: np.ndarray) -> np.ndarray:
    """The index in ``distinct`` of each hash: through a small table indexed by a few bits
    of the hash when some bits tell the distinct hashes apart, else by binary search."""
    bits = max(1, int(distinct.size - 1).bit_length())
    for width in range(bits, min(bits + 6, 20)):
        for shift in range(0, 64 - width, 5):
            slot = (distinct >> np.uint64(shift)) & np.uint64((1 << width) - 1)
            if np.unique(slot).size == distinct.size:
                table = np.zeros(1 << width, np.uint32)
                table[slot.astype(np.intp)] = np.arange(distinct.size, dtype=np.uint32)
                codes: np.ndarray = table[((hashed >> np.uint64(shift))
                                           & np.uint64((1 << width) - 1)).astype(np.intp)]
                return codes
    order = np.argsort(distinct)
    return order[np.searchsorted(distinct[order], hashed)].astype(np.uint32)


def _words(buf: np.ndarray, start: np.ndarray, length: np.ndarray) -> list[np.ndarray]:
    """Each span as little-endian u64 words, bytes past its end zeroed."""
    words = []
    tail = np.concatenate((buf[-8:], np.zeros(8, np.uint8)))  # the file's last bytes, padded
    for offset in range(0, int(length.max()), 8):
        at = start + offset
        word = read_at(buf, np.minimum(at, buf.size - 8), "<u8")
        late = np.flatnonzero(at > buf.size - 8)
        if late.size:
            word[late] = read_at(tail, np.minimum(at[late] - (buf.size - 8), 8), "<u8")
        keep = np.clip(length - offset, 0, 8).astype(np.uint64)
        mask = np.where(keep == 8, np.uint64(0xFFFFFFFFFFFFFFFF),
                        (np.uint64(1) << (keep * np.uint64(8))) - np.uint64(1))
        words.append(word & mask)
    return words


def _group_slow(buf: np.ndarray, start: np.ndarray,
                length: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    index: dict[bytes, int] = {}
    codes = np.empty(start.size, np.uint32)
    for i, (s, n) in enumerate(zip(start.tolist(), length.tolist())):
        codes[i] = index.setdefault(buf[s:s + n].tobytes(), len(index))
    return codes, list(index)


# -- one message at a time -------------------------------------------------------------

class ProtoError(ValueError):
    """Bytes that are not a well-formed protobuf message."""


def varint_at(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` and the position after it."""
    result = shift = 0
    while pos < end:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtoError(f"varint longer than 10 bytes at byte {pos}")
    raise ProtoError(f"truncated varint at byte {pos}")


def fields(buf: bytes, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, int, Any]]:
    """``(number, wire_type, value)`` of each field: an int, or bytes for wire type 2.

    >>> list(fields(bytes([0x08, 0x96, 0x01, 0x12, 0x02]) + b"hi"))
    [(1, 0, 150), (2, 2, b'hi')]
    """
    end = len(buf) if end is None else end
    value: int | bytes
    while pos < end:
        key, pos = varint_at(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtoError(f"field number 0 at byte {pos}")
        if wire == 0:
            value, pos = varint_at(buf, pos, end)
        elif wire == 2:
            length, pos = varint_at(buf, pos, end)
            if pos + length > end:
                raise ProtoError(f"field {number} runs past its message ({length} bytes)")
            value, pos = buf[pos:pos + length], pos + length
        else:
            after = skip_field(buf, pos, end, number, wire)
            value, pos = int.from_bytes(buf[pos:after], "little"), after
        yield number, wire, value


def skip_field(buf: bytes, pos: int, end: int, number: int, wire: int) -> int:
    """The position after the value of a field whose key ended at ``pos``."""
    if wire == 0:
        return varint_at(buf, pos, end)[1]
    if wire == 2:
        length, pos = varint_at(buf, pos, end)
    elif wire in (1, 5):
        length = 8 if wire == 1 else 4
    else:
        raise ProtoError(f"unsupported wire type {wire} (field {number})")
    if pos + length > end:
        raise ProtoError(f"field {number} runs past its message ({length} bytes)")
    return pos + length
