"""JSON-lines files read record by record, for the formats whose writer appends one
``json.dumps`` object a line to a small file (LLaMA-Factory's trainer_log.jsonl, detectron2's
metrics.json): the objects with their line numbers, the lines that do not parse, and the
last line when the file ends inside it. Python's ``json`` reads what ``json.dumps`` writes
(``NaN``, ``Infinity``). The big JSON-lines logs of hand-written loops go through
:func:`.lines.read_lines` instead (the ``jsonl`` format).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from ...errors import InputError
from ...model import Finding
from .damage import unparsed_finding
from .points import number_legs

__all__ = ["Records", "read_records", "record_rows"]


@dataclass
class Records:
    """What :func:`read_records` found in a file."""

    file: Path
    #: (line number, object) of each line holding a JSON object.
    objects: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    #: (line number, text) of each line that holds something but does not parse.
    bad: list[tuple[int, str]] = field(default_factory=list)
    #: The last line's number when the file ends inside it (a run killed while writing).
    cut: int | None = None

    def findings(self, what: str) -> list[Finding]:
        """``damaged-input`` for a cut last line, ``unparsed-lines`` for the others."""
        out = []
        if self.cut is not None:
            out.append(Finding("warning", "damaged-input",
                               f"{self.file}: line {self.cut} is cut off (the file ends inside "
                               "a JSON object, as when a run is killed while writing); "
                               "dropped it"))
        unparsed = unparsed_finding(self.file, pl.DataFrame(
            self.bad, schema={"line": pl.Int64, "text": pl.String}, orient="row"), what)
        return out + ([unparsed] if unparsed else [])


def read_records(file: Path) -> Records:
    """Every line of ``file`` that holds a JSON object, and what does not parse.

    >>> import tempfile, os
    >>> path = Path(tempfile.mkdtemp()) / "log.jsonl"
    >>> _ = path.write_text('{"a": 1}\\nnot json\\n{"a": NaN}\\n{"a": 3')
    >>> found = read_records(path)
    >>> found.objects[0], found.bad, found.cut
    ((1, {'a': 1}), [(2, 'not json')], 4)
    """
    try:
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"{file}: cannot be read ({exc.strerror})") from exc
    found = Records(file)
    lines = text.split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            if number == len(lines):  # no newline after it: the file ends inside this line
                found.cut = number
            else:
                found.bad.append((number, line))
            continue
        if isinstance(value, dict):
            found.objects.append((number, value))
    return found


def numbers(record: dict[str, Any], skip: frozenset[str] | set[str] = frozenset()
            ) -> dict[str, float]:
    """The top-level numbers of a record not in ``skip`` (booleans are no numbers).

    >>> numbers({"loss": 2, "ok": True, "name": "x", "step": 3}, {"step"})
    {'loss': 2.0}
    """
    return {key: float(value) for key, value in record.items()
            if key not in skip and isinstance(value, (int, float))
            and not isinstance(value, bool)}


def record_rows(kept: list[tuple[int, int, dict[str, float]]]
                ) -> tuple[pl.DataFrame, list[str]]:
    """(line, step, numbers) of each kept record as rows (line, step, a Float64 column per
    key, leg, wall_time null), and the keys in the order first seen: a new leg where the step
    goes back, and a step written again on the next line (an evaluation or a summary at the
    step of the train line before it) is no restart.

    >>> rows, keys = record_rows([(1, 10, {"loss": 2.0}), (2, 10, {"eval": 1.0}),
    ...                           (3, 5, {"loss": 2.5})])
    >>> rows.select("step", "leg").rows(), keys
    ([(10, 0), (10, 0), (5, 1)], ['loss', 'eval'])
    """
    keys = list(dict.fromkeys(key for _, _, values in kept for key in values))
    rows = pl.DataFrame([{"line": line, "step": step, **values} for line, step, values in kept],
                        schema={"line": pl.Int64, "step": pl.Int64,
                                **dict.fromkeys(keys, pl.Float64)}, orient="row")
    marks = rows.select("step", launch=pl.lit(False),
                        stepped=(pl.col("step") != pl.col("step").shift(1)).fill_null(True))
    return rows.with_columns(number_legs(marks, launch="launch", stepped="stepped"),
                             wall_time=pl.lit(None, pl.Float64)), keys
