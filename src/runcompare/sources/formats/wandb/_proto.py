"""The W&B ``Record`` fields runcompare needs, decoded one message at a time with the wire
format of :mod:`~runcompare.sources.codecs.protowire` (:func:`fields`).

Field numbers are those of ``wandb_internal.proto`` (FORMATS.md §3); nothing here imports the
wandb package or protobuf. Unknown fields are skipped, so newer writers still decode. Every
function raises :class:`ProtoError` (and nothing else) on malformed bytes.
"""

from __future__ import annotations

import json
import math
import struct
from typing import Any

from ...codecs.protowire import ProtoError, fields, skip_field, varint_at

__all__ = [
    "KINDS",
    "ONEOF",
    "decode_environment",
    "decode_exit",
    "decode_items",
    "decode_metric",
    "decode_output",
    "decode_run",
    "history_items",
    "record_kind",
]

#: Record.record_type fields runcompare reads (field number -> name).
KINDS = {2: "history", 3: "summary", 4: "output", 5: "config", 12: "metric", 13: "output_raw",
         17: "run", 18: "exit", 26: "environment"}
#: Every field number of the Record.record_type oneof (the record's kind, read or not).
ONEOF = frozenset(range(2, 14)) | (frozenset(range(17, 28)) - {19}) | {100}

_double = struct.Struct("<d").unpack_from


def record_kind(payload: bytes) -> tuple[int, bytes, int, int] | None:
    """The Record's ``record_type`` field number, body, and the body's span in ``payload``;
    None when it has none."""
    pos, end = 0, len(payload)
    while pos < end:
        key, pos = varint_at(payload, pos, end)
        number, wire = key >> 3, key & 7
        if number in ONEOF:
            if wire != 2:
                raise ProtoError(f"record field {number} is not a message")
            length, pos = varint_at(payload, pos, end)
            if pos + length > end:
                raise ProtoError(f"record field {number} runs past the record")
            return number, payload[pos:pos + length], pos, pos + length
        if number == 0:
            raise ProtoError(f"field number 0 at byte {pos}")
        pos = skip_field(payload, pos, end, number, wire)
    return None


def _text(value: Any) -> str:
    if not isinstance(value, bytes):
        raise ProtoError("expected a string field")
    return value.decode("utf-8", errors="replace")


def _item(body: bytes) -> tuple[tuple[str, ...], str]:
    """``(key path, value_json)`` of a HistoryItem / ConfigItem / SummaryItem.

    The path is ``nested_key`` when present, else ``(key,)``; a typed value (older writers'
    ``integer``, ``number``, ...) is turned into the JSON text W&B would have written.
    """
    key, nested, value_json, typed = "", [], None, None
    for number, wire, value in fields(body):
        if number == 1:
            key = _text(value)
        elif number == 2:
            nested.append(_text(value))
        elif number == 16:
            value_json = _text(value)
        elif 3 <= number <= 8:
            typed = _typed_json(number, wire, value)
    return (tuple(nested) if nested else (key,)), (value_json if value_json is not None
                                                   else typed or "null")


def _typed_json(number: int, wire: int, value: Any) -> str:
    """JSON text of HistoryItem's typed oneof: none=3, boolean=4, integer=5 (sint64),
    number=6 (double), text=7, json=8."""
    if number == 3:
        return "null"
    if number == 4 and wire == 0:
        return "true" if value else "false"
    if number == 5 and wire == 0:
        return str((value >> 1) ^ -(value & 1))
    if number == 6 and wire == 1:
        x = _double(value.to_bytes(8, "little"))[0]
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "Infinity" if x > 0 else "-Infinity"
        return repr(x)
    if number == 7:
        return json.dumps(_text(value))
    if number == 8:
        return _text(value)
    raise ProtoError(f"bad typed value field {number}")


def history_items(body: bytes) -> list[tuple[str, str]]:
    """The ``(key, value_json)`` items of a HistoryRecord (item=1; step=2 is not needed); the
    key is ``"/".join(nested_key)``.
    """
    items = (_item(value) for number, wire, value in fields(body) if number == 1 and wire == 2)
    return [("/".join(path), value) for path, value in items]


Item = tuple[tuple[str, ...], str]


def decode_items(body: bytes) -> tuple[list[Item], list[Item]]:
    """Updates (field 1) and removals (field 2) of a ConfigRecord or SummaryRecord."""
    updates: list[Item] = []
    removes: list[Item] = []
    for number, wire, value in fields(body):
        if wire == 2 and number in (1, 2):
            (updates if number == 1 else removes).append(_item(value))
    return updates, removes


def decode_metric(body: bytes) -> dict[str, str]:
    """MetricRecord: name=1, glob_name=2, step_metric=4 (empty strings dropped)."""
    names = {1: "name", 2: "glob_name", 4: "step_metric"}
    return {names[n]: _text(v) for n, w, v in fields(body) if n in names and v}


def _timestamp(body: bytes) -> float:
    """google.protobuf.Timestamp (seconds=1, nanos=2) as unix seconds."""
    seconds = nanos = 0
    for number, wire, value in fields(body):
        if number == 1 and wire == 0:
            seconds = value - (1 << 64) if value >= 1 << 63 else value
        elif number == 2 and wire == 0:
            nanos = value
    return seconds + nanos / 1e9


def decode_run(body: bytes) -> dict[str, Any]:
    """RunRecord: run_id=1, project=3, config=4, display_name=8, host=13, starting_step=14,
    start_time=17, resumed=18."""
    strings = {1: "run_id", 3: "project", 8: "display_name", 13: "host"}
    run: dict[str, Any] = {}
    for number, wire, value in fields(body):
        if number in strings and wire == 2:
            run[strings[number]] = _text(value)
        elif number == 4 and wire == 2:
            run["config"] = decode_items(value)[0]
        elif number == 14 and wire == 0:
            run["starting_step"] = value
        elif number == 17 and wire == 2:
            run["start_time"] = _timestamp(value)
        elif number == 18 and wire == 0:
            run["resumed"] = bool(value)
    return run


def decode_output(body: bytes) -> tuple[int, float | None, str]:
    """OutputRawRecord / OutputRecord: output_type=1 (0 stderr, 1 stdout), timestamp=2, line=3."""
    kind, when, line = 0, None, ""
    for number, wire, value in fields(body):
        if number == 1 and wire == 0:
            kind = value
        elif number == 2 and wire == 2:
            when = _timestamp(value)
        elif number == 3 and wire == 2:
            line = _text(value)
    return kind, when, line


def decode_exit(body: bytes) -> dict[str, int]:
    """RunExitRecord: exit_code=1 (int32), runtime=2."""
    out = {}
    for number, wire, value in fields(body):
        if number in (1, 2) and wire == 0:
            value = value - (1 << 64) if value >= 1 << 63 else value
            out["exit_code" if number == 1 else "runtime"] = value
    return out


def decode_environment(body: bytes) -> dict[str, Any]:
    """EnvironmentRecord: started_at=3, host=12, gpu_type=18, gpu_count=19."""
    env: dict[str, Any] = {}
    for number, wire, value in fields(body):
        if number == 3 and wire == 2:
            env["started_at"] = _timestamp(value)
        elif number in (12, 18) and wire == 2:
            env["host" if number == 12 else "gpu_type"] = _text(value)
        elif number == 19 and wire == 0:
            env["gpu_count"] = value
    return env
