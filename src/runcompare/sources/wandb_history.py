"""W&B history records decoded in bulk: numpy walks the protobuf, polars parses the values.

A HistoryRecord is ``item=1`` (repeated HistoryItem) plus ``step=2`` and bookkeeping fields.
Writers put each item as ``0x12 len nested_key 0x82 0x01 len value_json`` (current wandb-core;
the legacy writer uses ``key``, tag ``0x0A``). :func:`decode_history` walks all records in
lockstep, one field per record per numpy step, so a file of a million values costs a few dozen
array operations instead of a Python loop per field; keys and ``value_json`` texts become Arrow
string views into the file's bytes, and polars parses the numbers (``NaN``, ``Infinity``
included). A record of any other shape (several ``nested_key`` parts, typed values, damage)
falls back to :func:`wandb_proto.history_items`, which is also the reference the tests compare
against.
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa

from .wandb_proto import ONEOF, ProtoError, history_items

__all__ = ["HISTORY_SCHEMA", "decode_history", "record_types"]

#: One row per history item: ``row`` is the index of its record among the history records.
HISTORY_SCHEMA = {"row": pl.Int64, "key": pl.String, "value_json": pl.String}
#: Arrow string views hold signed 32-bit offsets into the blob.
_MAX_BLOB = 1 << 31
#: Field numbers of Record's record_type oneof.
_ONEOF = np.array(sorted(ONEOF))


def decode_history(blob: bytes, starts: np.ndarray,
                   ends: np.ndarray) -> tuple[pl.DataFrame, list[tuple[int, str]]]:
    """Items of the HistoryRecord bodies ``blob[starts[i]:ends[i]]``, and ``(i, error)`` for
    the undecodable ones; ``row`` in the frame is ``i``."""
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
    fast = pl.DataFrame({
        "row": rows[keep],
        "key": _strings(blob, buf, key_at[keep], key_len[keep]),
        "value_json": _strings(blob, buf, value_at[keep], value_len[keep]),
    }, schema=HISTORY_SCHEMA)
    slow_rows, slow_keys, slow_values, errors = [], [], [], []
    for row in np.flatnonzero(~ok).tolist():
        try:
            items = history_items(blob[starts[row]:ends[row]])
        except ProtoError as exc:
            errors.append((row, str(exc)))
            continue
        slow_rows += [row] * len(items)
        slow_keys += [key for key, _ in items]
        slow_values += [value for _, value in items]
    if not slow_rows:
        return fast, errors
    slow = pl.DataFrame({"row": slow_rows, "key": slow_keys, "value_json": slow_values},
                        schema=HISTORY_SCHEMA)
    return pl.concat([fast, slow]).sort("row", maintain_order=True), errors


def record_types(buf: np.ndarray, starts: np.ndarray,
                 ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``record_type`` field number of each Record ``buf[starts[i]:ends[i]]`` and its
    body's span; -1 where the walk found no type among the first fields or hit bad bytes
    (:func:`wandb_proto.record_kind` decides those), 0 for a record without a type."""
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
    those longer than 5 bytes (never a valid length here). One-byte varints, nearly all of
    them, cost one gather."""
    last = len(buf) - 1
    value = buf[np.minimum(at, last)].astype(np.int64)
    longer = np.flatnonzero(value >= 0x80)
    too_long = np.zeros(len(at), bool)
    if not longer.size:
        return value, at + 1, too_long
    size = np.ones(len(at), np.int64)
    part = value[longer] & 0x7F
    more = np.ones(len(longer), bool)
    for k in range(1, 5):
        byte = buf[np.minimum(at[longer] + k, last)].astype(np.int64)
        part |= np.where(more, (byte & 0x7F) << (7 * k), 0)
        size[longer] += more
        more &= byte >= 0x80
    value[longer] = part
    too_long[longer] = more
    return value, at + size, too_long


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
    """Find every item: first the chain of fields of each record (one field of every
    unfinished record per numpy step), then the inside of all items at once. Items of the
    common shape are kept; a record with anything unexpected is marked not ``ok`` (and
    decoded in Python instead)."""
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


def _heads(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The 12 bytes from each position ``at`` (zeros past the end of ``buf``)."""
    head = np.zeros((len(at), 12), np.uint8)
    safe = at <= len(buf) - 12
    if len(buf) >= 12:
        head[safe] = np.lib.stride_tricks.sliding_window_view(buf, 12)[at[safe]]
    for i in np.flatnonzero(~safe).tolist():
        tail = buf[at[i]:at[i] + 12]
        head[i, :len(tail)] = tail
    return head


def _strings(blob: bytes, buf: np.ndarray, at: np.ndarray, size: np.ndarray) -> pl.Series:
    """The UTF-8 texts ``blob[at:at+size]`` as a polars String series, without a Python loop.

    Builds Arrow string views (16 bytes each: length, then the text inline when it fits in 12
    bytes, else a 4-byte prefix and the offset into ``blob``). Invalid UTF-8 falls back to a
    per-text decode with replacement characters.
    """
    n = len(at)
    if n == 0:
        return pl.Series([], dtype=pl.String)
    # a view is four little-endian int32: length, then 12 inline bytes (zero padded), or a
    # 4-byte prefix, buffer 0 and the offset into ``blob`` for longer texts
    head = _heads(buf, at) * (np.arange(12) < size[:, None])
    views = np.empty((n, 4), np.int32)
    views[:, 0] = size
    views[:, 1:] = head.view("<i4")
    longer = np.flatnonzero(size > 12)
    views[longer, 2] = 0
    views[longer, 3] = at[longer]
    array = pa.Array.from_buffers(pa.string_view(), n,
                                  [None, pa.py_buffer(views.tobytes()), pa.py_buffer(blob)])
    try:
        array.validate(full=True)
    except pa.ArrowInvalid:
        return pl.Series([blob[a:a + s].decode("utf-8", errors="replace")
                          for a, s in zip(at.tolist(), size.tolist())], dtype=pl.String)
    return pl.Series(pl.from_arrow(array)).cast(pl.String)
