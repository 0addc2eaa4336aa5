"""One TensorBoard event file decoded into columns: scalars, texts, hparams, restarts.

Layouts (tensorboard/compat/proto): ``Event`` wall_time=1 (double), step=2 (int64),
summary=5, session_log=7 (status START=1), graph_def=4, tagged_run_metadata=8,
meta_graph_def=9; ``Summary`` value=1 (repeated); ``Summary.Value`` tag=1, simple_value=2
(float), histo=5, image=4, audio=6, tensor=8, metadata=9 (``SummaryMetadata`` plugin_data=1
with plugin_name=1 and content=2, data_class=4); ``TensorProto`` dtype=1, tensor_content=4,
float_val=5, double_val=6, int_val=7, string_val=8, int64_val=10, half_val=13.

The common records (scalars as ``simple_value`` or as one-element float/double/half tensors)
are decoded for the whole file at once by :mod:`.protowire`. The few unusual ones (text,
hparams, other dtypes) go through the ``tensorboard`` package's protobuf classes. A tensor
counts as a scalar when its tag's plugin is ``scalars`` (or its data class is scalar); TF2
writers put that metadata on a tag's first event only, so it is inherited per tag.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from ..codecs import protowire as pw
from ..codecs.files import Buffer
from ..codecs.tfrecord import HEADER, frame, read_at

__all__ = ["EventFile", "decode"]

#: Non-scalar Summary.Value fields, by field number, as reported.
_KINDS = {3: "histograms", 4: "images", 5: "histograms", 6: "audio"}
#: Event fields that hold graphs or run metadata (skipped and counted).
_EVENT_KINDS = {4: "graphs", 8: "run metadata", 9: "graphs"}
_DT_FLOAT, _DT_DOUBLE, _DT_INT32, _DT_INT64, _DT_BFLOAT16, _DT_HALF = 1, 2, 3, 9, 14, 19
_SCALAR_CLASS = 1
_START = 1


@dataclass
class EventFile:
    """What one event file holds.

    ``scalars`` has columns metric, value, step, wall_time and ``event`` (the event's index
    in the file); ``starts`` lists ``(event index, step)`` of each ``SessionLog.START``;
    ``texts`` the last text of each text tag (``text_rows`` how many); ``hparams`` the hparams
    plugin's session values;
    ``skipped`` counts non-scalar summaries by kind; ``damage`` says what could not be read;
    ``tags`` are the tags of the scalars (their distinct metrics, without a pass over them).
    """

    scalars: pl.DataFrame
    tags: set[str] = field(default_factory=set)
    starts: list[tuple[int, int]] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=dict)
    text_rows: Counter[str] = field(default_factory=Counter)
    hparams: dict[str, Any] = field(default_factory=dict)
    skipped: Counter[str] = field(default_factory=Counter)
    damage: list[tuple[int, str]] = field(default_factory=list)
    first_wall: float | None = None
    last_wall: float | None = None
    events: int = 0


_SCALARS = {"metric": pl.String, "value": pl.Float64, "step": pl.Int64, "wall_time": pl.Float64,
            "event": pl.Int64}


#: Records decoded at once: bounds the memory of the columnar passes (~100 bytes a record).
CHUNK = 1 << 18


def decode(data: Buffer, plugins: dict[str, str] | None = None) -> EventFile:
    """Decode the bytes of one event file. Never raises on bad bytes: they become ``damage``.

    ``plugins`` maps tags to the plugin named in their metadata; it is read and updated so
    that a later file of the same run can inherit it.
    """
    plugins = {} if plugins is None else plugins
    buf = np.frombuffer(data, np.uint8)
    frames = frame(buf)
    out = EventFile(pl.DataFrame(schema=_SCALARS))
    out.damage = [(d.offset, d.reason) for d in frames.damage]
    out.events = int(frames.starts.size)
    parts: list[Any] = []
    bad_count, first_bad = 0, None
    for lo in range(0, frames.starts.size, CHUNK):
        starts = frames.starts[lo:lo + CHUNK]
        bad = _decode_chunk(buf, starts, frames.lengths[lo:lo + CHUNK], lo, plugins, out, parts)
        if bad.any():
            bad_count += int(bad.sum())
            first_bad = first_bad if first_bad is not None else int(starts[np.argmax(bad)])
    if parts:
        out.scalars = parts[0] if len(parts) == 1 else pl.concat(parts, how="vertical")
    if first_bad is not None:
        reason = (f"{bad_count} records are not valid TensorBoard events (CRC intact, content "
                  "unreadable); skipped")
        out.damage.append((first_bad - HEADER, reason))
    return out


def _decode_chunk(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, first: int,
                  plugins: dict[str, str], out: EventFile, parts: list[pl.DataFrame]
                  ) -> np.ndarray:
    """Decode the records ``starts`` (numbered from ``first``) into ``out`` and ``parts``;
    return the mask of records that are no valid event."""
    event = pw.walk(buf, starts, starts + lengths, {1, 2, 4, 5, 7, 8, 9})
    wall = np.zeros(starts.size)
    has_wall = event.fields[1].has(1)
    wall[has_wall] = read_at(buf, event.fields[1].a[has_wall], "<f8")
    step = np.where(event.fields[2].has(0), event.fields[2].a, 0)
    ok = ~event.bad
    if ok.any():
        if out.first_wall is None:
            out.first_wall = float(wall[ok][0])
        out.last_wall = max(out.last_wall or float("-inf"), float(wall[ok].max()))
    for number, kind in _EVENT_KINDS.items():
        out.skipped[kind] += int((event.fields[number].has(2) & ok).sum())
    out.starts += [(first + i, s) for i, s in _session_starts(buf, event, step)]
    values = _values(buf, event, ok)
    bad: np.ndarray = event.bad.copy()
    frame = _decode_values(buf, values, wall, step, plugins, out, bad)
    parts.append(frame.with_columns(pl.col("event") + first) if first else frame)
    return bad


def _session_starts(buf: np.ndarray, event: pw.Walk, step: np.ndarray) -> list[tuple[int, int]]:
    logs = np.flatnonzero(event.fields[7].has(2) & ~event.bad)
    if logs.size == 0:
        return []
    column = event.fields[7]
    status = pw.walk(buf, column.a[logs], column.a[logs] + column.b[logs], {1})
    starting = logs[(status.fields[1].a == _START) & status.fields[1].has(0) & ~status.bad]
    return [(int(i), int(step[i])) for i in starting]


@dataclass
class _Values:
    """The Summary.Value rows of a file: which event each belongs to and its parsed fields."""

    event: np.ndarray
    start: np.ndarray
    end: np.ndarray
    walk: pw.Walk


def _values(buf: np.ndarray, event: pw.Walk, ok: np.ndarray) -> _Values:
    """The Summary.Value rows of the events, in event order then order within the summary."""
    column = event.fields[5]
    summaries = np.flatnonzero(column.has(2) & ok)
    start, length = column.a[summaries], column.b[summaries]
    single, value_start, value_length = _single_values(buf, start, length)
    owner, start, length = summaries[single], value_start[single], value_length[single]
    others = np.flatnonzero(~single)
    if others.size:  # summaries of several values (or malformed ones): the general walk
        begin = column.a[summaries[others]]
        summary = pw.walk(buf, begin, begin + column.b[summaries[others]], set(), repeated=1)
        event.bad[summaries[others[summary.bad]]] = True
        lane, more_start, more_length = summary.rows
        if summary.bad.any():
            keep = ~summary.bad[lane]
            lane, more_start, more_length = lane[keep], more_start[keep], more_length[keep]
        more_owner = summaries[others[lane]]
        if owner.size:  # both kinds: merge in event order
            owner = np.concatenate((owner, more_owner))
            start = np.concatenate((start, more_start))
            length = np.concatenate((length, more_length))
            order = np.lexsort((start, owner))
            owner, start, length = owner[order], start[order], length[order]
        else:  # the walk's rows are in event order already
            owner, start, length = more_owner, more_start, more_length
    end = start + length
    return _Values(owner, start, end, pw.walk(buf, start, end, {1, 2, 3, 4, 5, 6, 8, 9}))


def _single_values(buf: np.ndarray, start: np.ndarray,
                   length: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Summaries that are exactly one ``value`` field (what every writer but TF1's merged
    summaries writes): a mask, and the value's offset and length."""
    if start.size == 0:
        return np.zeros(0, bool), start, length
    key = buf[np.minimum(start, buf.size - 1)]
    size, after = pw.varint(buf, start + 1)
    value_length = size.view(np.int64)
    single = (key == 0x0A) & (length > 0) & (after + value_length == start + length)
    return single, after, value_length


def _decode_values(buf: np.ndarray, values: _Values, wall: np.ndarray, step: np.ndarray,
                   plugins: dict[str, str], out: EventFile, bad: np.ndarray) -> pl.DataFrame:
    """Sort each value into scalar, text, hparams or skipped, and decode the scalars."""
    fields = values.walk.fields
    bad[values.event[values.walk.bad]] = True
    live = ~values.walk.bad & fields[1].has(2)
    codes, tags = pw.group_spans(buf, np.where(live, fields[1].a, 0),
                                 np.where(live, fields[1].b, 0))
    names = [tag.decode("utf-8", "replace") for tag in tags]
    own, kinds, scalar_class = _plugins(buf, fields[9], live)
    inherited = _inherit(codes, own, live, names, kinds, plugins)
    plugin = np.where(own > 0, own, inherited[codes] if codes.size else own)
    simple = live & fields[2].has(5)
    for number, kind in _KINDS.items():
        counted = live & ~simple & fields[number].has(2)
        out.skipped[kind] += int(counted.sum())
        live &= ~counted
    tensor = live & ~simple & fields[8].has(2)
    scalar_tensor = tensor & ((plugin == kinds.index("scalars")) | scalar_class)
    value = np.full(codes.size, np.nan)
    value[simple] = read_at(buf, fields[2].a[simple], "<f4")
    decoded, fast = _tensor_scalars(buf, fields[8], scalar_tensor)
    value[fast] = decoded
    keep = simple | fast
    for row in np.flatnonzero(scalar_tensor & ~fast):
        scalar = _slow_scalar(buf, int(values.start[row]), int(values.end[row]))
        if scalar is None:
            out.skipped["non-scalar tensors"] += 1
        else:
            value[row], keep[row] = scalar, True
    others = np.flatnonzero(live & ~simple & ~scalar_tensor)
    _count_skipped(plugin[others], fields[8].has(2)[others], kinds, out)
    special = others[np.isin(plugin[others], np.array(
        [kinds.index(k) for k in ("text", "hparams") if k in kinds], np.int32))]
    _other_values(buf, values, special, [kinds[i] for i in plugin[special]],
                  [names[i] for i in codes[special]], out)
    rows = np.flatnonzero(keep)
    events = values.event[rows]
    out.tags.update(names[i] for i in np.flatnonzero(np.bincount(codes[rows],
                                                                  minlength=len(names))))
    metric = pl.Series("metric", names or [""], pl.String).gather(codes[rows])
    return pl.DataFrame({"metric": metric, "value": value[rows], "step": step[events],
                         "wall_time": wall[events], "event": events}, schema=_SCALARS)


def _plugins(buf: np.ndarray, metadata: pw.Column,
             live: np.ndarray) -> tuple[np.ndarray, list[str], np.ndarray]:
    """Each row's plugin as an index into the returned names (0: no metadata), and whether
    its metadata says the data class is scalar."""
    kinds = ["", "scalars"]
    plugin = np.zeros(live.size, np.int32)
    scalar_class = np.zeros(live.size, bool)
    rows = np.flatnonzero(live & metadata.has(2))
    if rows.size == 0:
        return plugin, kinds, scalar_class
    meta = pw.walk(buf, metadata.a[rows], metadata.a[rows] + metadata.b[rows], {1, 4})
    scalar_class[rows] = meta.fields[4].has(0) & (meta.fields[4].a == _SCALAR_CLASS)
    data = meta.fields[1]
    has_data = np.flatnonzero(data.has(2) & ~meta.bad)
    names = pw.walk(buf, data.a[has_data], data.a[has_data] + data.b[has_data], {1})
    named = np.flatnonzero(names.fields[1].has(2) & ~names.bad)
    codes, uniques = pw.group_spans(buf, names.fields[1].a[named], names.fields[1].b[named])
    index = []
    for unique in uniques:
        text = unique.decode("utf-8", "replace")
        if text not in kinds:
            kinds.append(text)
        index.append(kinds.index(text))
    if codes.size:
        plugin[rows[has_data[named]]] = np.array(index, np.int32)[codes]
    return plugin, kinds, scalar_class


def _inherit(codes: np.ndarray, own: np.ndarray, live: np.ndarray, names: list[str],
             kinds: list[str], known: dict[str, str]) -> np.ndarray:
    """Per tag code: the first plugin its rows name, else what an earlier file said.

    Updates ``known`` (tag -> plugin name) for the files that follow.
    """
    for name in known.values():
        if name not in kinds:
            kinds.append(name)
    tag_plugin = np.array([kinds.index(known.get(name, "")) for name in names] or [0], np.int32)
    named = np.flatnonzero(live & (own > 0))
    if named.size:
        first_codes, first_rows = np.unique(codes[named], return_index=True)
        tag_plugin[first_codes] = own[named[first_rows]]
    for code, name in enumerate(names):
        if tag_plugin[code]:
            known[name] = kinds[tag_plugin[code]]
    return tag_plugin


def _tensor_scalars(buf: np.ndarray, tensor: pw.Column,
                    rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Values of one-element float, double, half and bfloat16 tensors, vectorised.

    Returns the values and a mask (over all rows) of the rows decoded; the others need the
    protobuf fallback.
    """
    index = np.flatnonzero(rows)
    done = np.zeros(rows.size, bool)
    if index.size == 0:
        return np.empty(0), done
    t = pw.walk(buf, tensor.a[index], tensor.a[index] + tensor.b[index], {1, 4, 5, 6, 13})
    dtype = np.where(t.fields[1].has(0), t.fields[1].a, 0)
    value = np.full(index.size, np.nan)
    ok = np.zeros(index.size, bool)
    content, fval, dval, hval = t.fields[4], t.fields[5], t.fields[6], t.fields[13]
    no_content = ~content.has(2)
    cases = [
        (_DT_FLOAT, content.has(2) & (content.b == 4), content.a, "<f4"),
        (_DT_FLOAT, no_content & fval.has(2) & (fval.b == 4), fval.a, "<f4"),
        (_DT_FLOAT, no_content & fval.has(5) & ~fval.repeated, fval.a, "<f4"),
        (_DT_DOUBLE, content.has(2) & (content.b == 8), content.a, "<f8"),
        (_DT_DOUBLE, no_content & dval.has(2) & (dval.b == 8), dval.a, "<f8"),
        (_DT_DOUBLE, no_content & dval.has(1) & ~dval.repeated, dval.a, "<f8"),
        (_DT_HALF, content.has(2) & (content.b == 2), content.a, "<f2"),
        (_DT_BFLOAT16, content.has(2) & (content.b == 2), content.a, "bf16"),
    ]
    for code, where, at, kind in cases:
        hit = np.flatnonzero((dtype == code) & where & ~ok & ~t.bad)
        if kind == "bf16":
            bits = read_at(buf, at[hit], "<u2").astype(np.uint32) << np.uint32(16)
            value[hit] = bits.view(np.float32)
        else:
            value[hit] = read_at(buf, at[hit], kind)
        ok[hit] = True
    for code in (_DT_HALF, _DT_BFLOAT16):
        hit = np.flatnonzero((dtype == code) & no_content & ~ok & ~t.bad
                             & (hval.has(0) & ~hval.repeated | hval.has(2)))
        bits, after = pw.varint(buf, hval.a[hit])
        valid = hval.has(0)[hit] | (after == hval.a[hit] + hval.b[hit])
        hit, bits = hit[valid], bits[valid].astype(np.uint16)
        value[hit] = (bits.view(np.float16) if code == _DT_HALF
                      else (bits.astype(np.uint32) << np.uint32(16)).view(np.float32))
        ok[hit] = True
    done[index[ok]] = True
    return value[ok], done


def _slow_scalar(buf: np.ndarray, start: int, end: int) -> float | None:
    """A scalar tensor of an unusual encoding, through the protobuf classes; None if the
    tensor holds other than one number."""
    value = _parse_value(buf, start, end)
    if value is None:
        return None
    from tensorboard.util import tensor_util

    try:
        array = tensor_util.make_ndarray(value.tensor)
    except Exception:  # noqa: BLE001 - any failure means: not a readable number
        return None
    if array.size != 1 or array.dtype.kind not in "fiub":
        return None
    return float(array.reshape(-1)[0])


def _parse_value(buf: np.ndarray, start: int, end: int) -> Any:
    from google.protobuf.message import DecodeError
    from tensorboard.compat.proto import summary_pb2

    try:
        return summary_pb2.Summary.Value.FromString(buf[start:end].tobytes())
    except (DecodeError, RuntimeError, ValueError):
        return None


def _count_skipped(plugin: np.ndarray, tensor: np.ndarray, kinds: list[str],
                   out: EventFile) -> None:
    """Count the tensors of plugins other than scalars, text and hparams, by plugin."""
    counts = np.bincount(plugin[tensor], minlength=len(kinds))
    for index, count in enumerate(counts.tolist()):
        if count and kinds[index] not in ("text", "hparams"):
            out.skipped[kinds[index] or "unlabelled tensors"] += count


def _other_values(buf: np.ndarray, values: _Values, rows: np.ndarray, plugins: list[str],
                  tags: list[str], out: EventFile) -> None:
    """Texts and hparams, through the protobuf classes (a few rows per run)."""
    for row, plugin, tag in zip(rows.tolist(), plugins, tags):
        start, end = int(values.start[row]), int(values.end[row])
        if plugin == "text":
            text = _text(buf, start, end)
            if text is not None:
                out.texts[tag] = text
            out.text_rows[tag] += 1
        else:
            out.hparams.update(_hparams(buf, start, end))


def _text(buf: np.ndarray, start: int, end: int) -> str | None:
    value = _parse_value(buf, start, end)
    if value is None or not value.tensor.string_val:
        return None
    return "\n".join(s.decode("utf-8", "replace") for s in value.tensor.string_val)


def _hparams(buf: np.ndarray, start: int, end: int) -> dict[str, Any]:
    """The hparams of a session-start summary (``{}`` for experiment and session-end ones)."""
    value = _parse_value(buf, start, end)
    if value is None:
        return {}
    from google.protobuf.message import DecodeError
    from tensorboard.plugins.hparams import plugin_data_pb2

    try:
        data = plugin_data_pb2.HParamsPluginData.FromString(value.metadata.plugin_data.content)
    except (DecodeError, RuntimeError, ValueError):
        return {}
    if not data.HasField("session_start_info"):
        return {}
    found: dict[str, Any] = {}
    for key, item in data.session_start_info.hparams.items():
        kind = item.WhichOneof("kind")
        if kind in ("number_value", "string_value", "bool_value"):
            found[key] = getattr(item, kind)
    return found
