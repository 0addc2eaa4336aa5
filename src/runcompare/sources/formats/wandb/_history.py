"""W&B history records decoded in bulk: numpy walks the protobuf, polars parses the values.

A HistoryRecord is ``item=1`` (repeated HistoryItem) plus ``step=2`` and bookkeeping fields.
Writers put each item as ``0x12 len nested_key 0x82 0x01 len value_json`` (current wandb-core;
the legacy writer uses ``key``, tag ``0x0A``). :func:`decode_history` walks all records in
lockstep, one field per record per numpy step, so a file of a million values costs a few dozen
array operations instead of a Python loop per field. Records whose fields and items all have
one-byte tags and lengths (what wandb writes) take :func:`_plain_walk`: one two-byte gather per
record per step, then every item checked at once, a stretch of items at a time so that their
bytes are read from memory once (the file is far larger than the CPU cache). Other records take
:func:`_general_walk` (varints of any length). Keys and ``value_json`` texts become Arrow string
views into the file's bytes, built from 8-byte words read in the same stretches (texts known to
be ASCII need no UTF-8 check; equal keys share one view target, which makes later comparisons
cheap), and polars parses the numbers (``NaN``, ``Infinity`` included). A record of any other
shape (several ``nested_key`` parts, typed values, damage) falls back to
:func:`._proto.history_items`, which is also the reference the tests compare against.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import polars as pl

from ...codecs.files import Buffer
from ...codecs.protowire import ProtoError, varint
from ...codecs.strings import CHUNK, string_columns
from ._proto import ONEOF, history_items

__all__ = ["HISTORY_SCHEMA", "decode_history", "record_types", "with_values"]

#: One row per history item: ``row`` is the index of its record among the history records,
#: ``value`` the number of ``value_json`` (parsed here, in the decoding threads).
HISTORY_SCHEMA = {"row": pl.Int64, "key": pl.String, "value_json": pl.String,
                  "value": pl.Float64}
_TEXTS = {name: HISTORY_SCHEMA[name] for name in ("row", "key", "value_json")}
T = TypeVar("T")
#: Threads that decode history records, and the fewest records worth a thread.
WORKERS = 2
_PART = 20_000
#: Arrow string views hold signed 32-bit offsets into the blob.
_MAX_BLOB = 1 << 31
#: Field numbers of Record's record_type oneof.
_ONEOF = np.array(sorted(ONEOF))


def decode_history(blob: Buffer, starts: np.ndarray,
                   ends: np.ndarray) -> tuple[pl.DataFrame, list[tuple[int, str]]]:
    """Items of the HistoryRecord bodies ``blob[starts[i]:ends[i]]``, and ``(i, error)`` for
    the undecodable ones; ``row`` in the frame is ``i``.

    Many records are decoded in :data:`WORKERS` parts at once, in threads (numpy releases the
    GIL in the array operations, and the walk waits on memory more than on the CPU)."""
    bounds, done = _in_parts(lambda lo, hi: _decode_part(blob, starts[lo:hi], ends[lo:hi]),
                             len(starts))
    if len(done) == 1:
        return done[0]
    frames = [frame.with_columns(pl.col("row") + lo) for (frame, _), lo in zip(done, bounds)]
    errors = [(row + lo, error) for (_, found), lo in zip(done, bounds) for row, error in found]
    return pl.concat(frames), errors


def _in_parts(work: Callable[[int, int], T], count: int) -> tuple[list[int], list[T]]:
    """``work(lo, hi)`` over ``range(count)`` cut in up to :data:`WORKERS` parts of at least
    :data:`_PART` items, each in a thread; the parts' starts and results, in order."""
    parts = min(WORKERS, max(count // _PART, 1))
    bounds = np.linspace(0, count, parts + 1).astype(np.int64).tolist()
    if parts == 1:
        return [0], [work(0, count)]
    with ThreadPoolExecutor(max_workers=parts) as pool:
        return bounds[:-1], list(pool.map(work, bounds[:-1], bounds[1:]))


def _decode_part(blob: Buffer, starts: np.ndarray,
                 ends: np.ndarray) -> tuple[pl.DataFrame, list[tuple[int, str]]]:
    """:func:`decode_history` in this thread."""
    if len(blob) >= _MAX_BLOB:  # string views hold 32-bit offsets: walk a compact copy
        lengths = ends - starts
        blob = b"".join(blob[a:b] for a, b in zip(starts.tolist(), ends.tolist()))
        ends = np.cumsum(lengths)
        starts = ends - lengths
    if len(blob) >= _MAX_BLOB:
        raise ValueError("more than 2 GiB of history in one file")
    buf = np.frombuffer(blob, np.uint8)
    rows, key_at, key_len, value_at, value_len, ok = _walk(buf, starts, ends)
    keep = ok[rows]
    if not keep.all():
        rows, key_at, key_len, value_at, value_len = (
            column[keep] for column in (rows, key_at, key_len, value_at, value_len))
    keys, values = string_columns(blob, buf, [(key_at, key_len), (value_at, value_len)])
    fast = pl.DataFrame({"row": rows, "key": keys, "value_json": values}, schema=_TEXTS)
    slow_rows, slow_keys, slow_values, errors = [], [], [], []
    for row in np.flatnonzero(~ok).tolist():
        try:
            items = history_items(bytes(blob[starts[row]:ends[row]]))
        except ProtoError as exc:
            errors.append((row, str(exc)))
            continue
        slow_rows += [row] * len(items)
        slow_keys += [key for key, _ in items]
        slow_values += [value for _, value in items]
    if slow_rows:
        slow = pl.DataFrame({"row": slow_rows, "key": slow_keys, "value_json": slow_values},
                            schema=_TEXTS)
        fast = pl.concat([fast, slow]).sort("row", maintain_order=True)
    return with_values(fast), errors


def with_values(items: pl.DataFrame) -> pl.DataFrame:
    """History items ``(row, key, value_json)`` with ``value``: the number, or null when the
    text is not one (``NaN``, ``Infinity`` are numbers)."""
    return items.with_columns(value=pl.col("value_json").cast(pl.Float64, strict=False))


def record_types(buf: np.ndarray, starts: np.ndarray,
                 ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``record_type`` field number of each Record ``buf[starts[i]:ends[i]]`` and its
    body's span; -1 where the walk found no type among the first fields or hit bad bytes
    (:func:`._proto.record_kind` decides those), 0 for a record without a type.

    Records of the usual shape (``num=1``, then the type as a one-byte tag) are typed in a
    few array operations (:func:`_usual_types`); the others walk up to six fields. Many
    records are typed in parts, in threads, like :func:`decode_history`."""
    _, done = _in_parts(lambda lo, hi: _types_part(buf, starts[lo:hi], ends[lo:hi]),
                        len(starts))
    if len(done) == 1:
        return done[0]
    kinds, body_starts, body_ends = (np.concatenate(c) for c in zip(*done))
    return kinds, body_starts, body_ends


def _types_part(buf: np.ndarray, starts: np.ndarray,
                ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`record_types` in this thread."""
    kind, body_at, body_end = _usual_types(buf, starts, ends)
    other = np.flatnonzero(kind < 0)
    if other.size:
        kind[other], body_at[other], body_end[other] = _walk_types(buf, starts[other],
                                                                   ends[other])
    return kind, body_at, body_end


#: Single-byte tags of length-delimited Record fields that are record types.
_TYPE_TAG = np.zeros(256, bool)
_TYPE_TAG[[n << 3 | 2 for n in ONEOF if n < 16]] = True


def _usual_types(buf: np.ndarray, starts: np.ndarray,
                 ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`record_types` of records that start with an optional ``num`` varint (tag 0x08)
    and then the record type field with a one-byte tag; -1 for every other record."""
    if not buf.size:
        return np.full(len(starts), -1, np.int64), starts * 0, starts * 0
    last = len(buf) - 1
    pos = starts.copy()
    first = buf[np.minimum(pos, last)]
    numbered = (first == 0x08) & (pos < ends)
    pos += numbered
    pos, bad = _skip_varints(buf, pos, numbered, ends, 10)
    tag = buf[np.minimum(pos, last)]
    typed = ~bad & (pos + 1 < ends) & _TYPE_TAG[tag]
    size, after, long_size = _varints(buf, np.minimum(pos + 1, last))
    body_end = after + size
    typed &= ~long_size & (body_end <= ends)
    kind = np.where(typed, (tag >> 3).astype(np.int64), -1)
    return kind, np.where(typed, after, 0), np.where(typed, body_end, 0)


def _skip_varints(buf: np.ndarray, pos: np.ndarray, where: np.ndarray, ends: np.ndarray,
                  longest: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions after the varints at ``pos`` (where ``where``; others stay), and a mask of
    those longer than ``longest`` bytes or running past ``ends``."""
    at = pos[where]
    _, after = varint(buf, at)
    pos = pos.copy()
    pos[where] = np.minimum(after, len(buf))
    bad = np.zeros(len(pos), bool)
    bad[where] = (after - at > longest) | (after > ends[where])
    return pos, bad


def _walk_types(buf: np.ndarray, starts: np.ndarray,
                ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`record_types` by walking up to six fields of each record."""
    kind = np.zeros(len(starts), np.int64)
    body_at = np.zeros(len(starts), np.int64)
    body_end = np.zeros(len(starts), np.int64)
    pos = starts.copy()
    live = np.flatnonzero(pos < ends)
    for _ in range(6):  # num=1, control=16, uuid=19 may come first
        if not live.size:
            break
        number, wire, value_at, field_end, bad = _field(buf, pos[live], ends[live])
        typed = np.isin(number, _ONEOF)
        bad |= typed & (wire != 2)
        found = ~bad & typed
        kind[live[found]] = number[found]
        body_at[live[found]] = value_at[found]
        body_end[live[found]] = field_end[found]
        kind[live[bad]] = -1
        pos[live] = field_end
        live = live[~bad & ~found & (field_end < ends[live])]
    kind[live] = -1
    return kind, body_at, body_end


def _varints(buf: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Values of the varints at positions ``at``, the positions after them, and a mask of
    those longer than 5 bytes (never a valid length here) or running past ``buf``."""
    value, after = varint(buf, at)
    bad = (after - at > 5) | (after > len(buf))
    # a bad one's value is 0, its position at most 5 bytes on: never an index out of the buffer
    return np.where(bad, 0, value.astype(np.int64)), np.minimum(after, at + 5), bad


def _field(buf: np.ndarray, at: np.ndarray,
           end: np.ndarray) -> tuple[np.ndarray, ...]:
    """The field starting at each ``at`` (within ``end``): number, wire type, where a
    length-delimited value starts, where the field ends, and a mask of malformed ones."""
    key, after_key, bad = _varints(buf, at)
    wire = key & 7
    size, after_size, bad_size = _varints(buf, after_key)
    field_end = np.select([wire == 2, wire == 0, wire == 1, wire == 5],
                          [after_size + size, after_size, after_key + 8, after_key + 4],
                          default=end + 1)
    bad |= (((wire == 2) | (wire == 0)) & bad_size) | (field_end > end) | (key >> 3 == 0)
    return key >> 3, wire, after_size, field_end, bad


def _walk(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...]:
    """Find every item: ``(rows, key_at, key_len, value_at, value_len, ok)``, items in record
    order; a record with anything unexpected is marked not ``ok`` (and decoded in Python
    instead). Records of the plain shape take :func:`_plain_walk`, the others
    :func:`_general_walk`."""
    found = _plain_walk(buf, starts, ends)
    ok = found[-1].copy()
    other = np.flatnonzero(~ok)
    if not other.size:
        return found
    more = _general_walk(buf, starts[other], ends[other])
    ok[other] = more[-1]
    keep = more[-1][more[0]]
    if not keep.any():
        return (*found[:-1], ok)
    rows = found[0]
    extra = (other[more[0][keep]], *(column[keep] for column in more[1:-1]))
    # both are sorted by row and hold different rows: merge them
    at_old = np.arange(len(rows)) + np.searchsorted(extra[0], rows)
    at_new = np.arange(len(extra[0])) + np.searchsorted(rows, extra[0])
    merged = []
    for old, new in zip(found[:-1], extra):
        column = np.empty(len(old) + len(new), np.int64)
        column[at_old], column[at_new] = old, new
        merged.append(column)
    return (*merged, ok)


def _plain_walk(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`_walk` of the records whose every field has a one-byte tag of wire type 2 and a
    one-byte length, and whose every item is ``(0x12 | 0x0A) len key 0x82 0x01 len value``
    with one-byte lengths, which is how wandb writes them; ``ok`` is False for the records of
    any other shape (their items are left out).

    Each numpy step reads one field (a two-byte gather) of every unfinished record; then the
    items are put in record order and all checked at once, with two four-byte gathers each.
    """
    n = len(starts)
    empty = np.zeros(0, np.int64)
    if buf.size < 8:
        return empty, empty, empty, empty, empty, np.zeros(n, bool)
    plain = np.ones(n, bool)
    u16 = np.ndarray((buf.size - 1,), "<u2", buf, 0, (1,))
    rows = np.flatnonzero(starts < ends)
    at, end = starts[rows], ends[rows]
    seen = np.zeros(len(rows), np.int64)
    steps: list[tuple[np.ndarray, ...]] = []
    while rows.size:
        word = u16[np.minimum(at, buf.size - 2)]  # tag, length (a clamped read fails below)
        tag = word & 0xFF
        after = at + 2 + (word >> 8)
        good = ((tag & 0x87) == 2) & (tag >= 8) & (word < 0x8000) & (after <= end)
        item = good & (tag == 0x0A)
        if item.all():
            steps.append((rows, seen, at, after))
            seen = seen + 1
        else:
            steps.append((rows[item], seen[item], at[item], after[item]))
            seen = seen + item
        more = good & (after < end)
        if not good.all():
            plain[rows[~good]] = False
        if more.all():
            at = after
        else:
            rows, at, end, seen = rows[more], after[more], end[more], seen[more]
    item_rows, index, item_at, item_end = (np.concatenate(c) for c in zip(*steps)) \
        if steps else (empty, empty, empty, empty)
    # record order: the items of record r go to first[r] + their index in it
    count = np.bincount(item_rows, minlength=n)
    first = np.cumsum(count) - count
    where = first[item_rows] + index
    rows = np.repeat(np.arange(n), count)
    at, end = np.empty_like(item_at), np.empty_like(item_end)
    at[where], end[where] = item_at, item_end
    # inside an item: 0x0A len (0x12 | 0x0A) len key 0x82 0x01 len value, up to its end; a read
    # clamped at the end of ``buf`` can only belong to an item that fails the length check
    u32 = np.ndarray((buf.size - 3,), "<u4", buf, 0, (1,))
    key_len, value_len = np.empty(len(at), np.int64), np.empty(len(at), np.int64)
    shaped = np.empty(len(at), bool)
    for lo in range(0, len(at), CHUNK):  # a stretch of items at a time: its bytes stay cached
        a, e = at[lo:lo + CHUNK], end[lo:lo + CHUNK]
        head = u32[np.minimum(a, buf.size - 4)]
        size = (head >> 24).astype(np.int64)
        key_end = a + 4 + size
        mark = u32[np.minimum(key_end - 1, buf.size - 4)]
        key_len[lo:lo + CHUNK] = size
        value_len[lo:lo + CHUNK] = mark >> 24
        tag = (head >> 16) & 0xFF
        shaped[lo:lo + CHUNK] = (((tag == 0x12) | (tag == 0x0A)) & (size < 0x80)
                                  & (((mark >> 8) & 0xFFFF) == 0x0182) & (mark < 0x80000000)
                                  & (key_end + 3 + (mark >> 24) == e))
    key_at = at + 4
    value_at = key_at + key_len + 3
    if not shaped.all():
        plain[rows[~shaped]] = False
    columns: tuple[np.ndarray, ...] = (rows, key_at, key_len, value_at, value_len)
    if not plain.all():
        keep = plain[rows]
        columns = tuple(column[keep] for column in columns)
    return (*columns, plain)


def _general_walk(buf: np.ndarray, starts: np.ndarray,
                  ends: np.ndarray) -> tuple[np.ndarray, ...]:
    """:func:`_walk` field by field with varints of any length: first the chain of fields of
    each record (one field of every unfinished record per numpy step), then the inside of all
    items at once."""
    ok = np.ones(len(starts), bool)
    pos = starts.copy()
    spans: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    live = np.flatnonzero(pos < ends)
    while live.size:
        end = ends[live]
        number, wire, inner, field_end, bad = _field(buf, pos[live], end)
        item = (number == 1) & (wire == 2) & ~bad
        spans.append((live[item], inner[item], field_end[item]))
        ok[live[bad]] = False
        pos[live] = field_end
        live = live[~bad & (field_end < end)]
    empty = np.zeros(0, np.int64)
    if not spans:
        return empty, empty, empty, empty, empty, ok
    rows, inner, item_end = (np.concatenate(c) for c in zip(*spans))
    order = np.argsort(rows, kind="stable")
    rows, inner, item_end = rows[order], inner[order], item_end[order]
    # inside an item: (0x12 | 0x0A) len key 0x82 0x01 len value, ending at the item's end
    last = len(buf) - 1
    tag = buf[np.minimum(inner, last)]
    key_len, key_at, bad_key = _varints(buf, inner + 1)
    key_end = key_at + key_len
    marker = ((buf[np.minimum(key_end, last)] == 0x82)
              & (buf[np.minimum(key_end + 1, last)] == 0x01))
    value_len, value_at, bad_value = _varints(buf, np.minimum(key_end + 2, last))
    shaped = (((tag == 0x12) | (tag == 0x0A)) & ~bad_key & marker & ~bad_value
              & (key_end + 2 <= item_end) & (value_at + value_len == item_end))
    ok[rows[~shaped]] = False
    return rows, key_at, key_len, value_at, value_len, ok
