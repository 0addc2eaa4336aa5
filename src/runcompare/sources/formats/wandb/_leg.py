"""One W&B run folder decoded: its ``.wandb`` records and the JSON/YAML files beside them.

:func:`decode_leg` turns ``run-<date>-<id>/`` (one leg of a run: a resume into the same id
writes another folder) into a :class:`Leg`: run record, merged config and summary, metric
definitions, history items, environment, exit record and damage findings. ``files/config.yaml``
(``{value: ...}`` wrappers), ``files/wandb-summary.json`` and ``files/wandb-metadata.json`` fill
in what the ``.wandb`` file lacks (older writers kept them even for offline runs).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ....errors import InputError
from ....model import Finding
from ...codecs.files import Buffer, files_in, is_file, read_file
from ...codecs.leveldb import HeaderError, read_records
from ...codecs.protowire import ProtoError
from ._history import HISTORY_SCHEMA, decode_history, record_types
from ._proto import (
    KINDS,
    decode_environment,
    decode_exit,
    decode_items,
    decode_metric,
    decode_output,
    decode_run,
    record_kind,
)

__all__ = ["RUN_DIR", "SIDE_FILES", "SUMMARY_KEYS", "Leg", "decode_leg", "wandb_file"]

#: ``run-20261129_095950-7q0rgjvl`` or ``offline-run-...``: the date and the run id.
RUN_DIR = re.compile(r"^(?:offline-)?run-(\d{8}_\d{6})-(.+)$")
#: Summary keys kept (the HF Trainer's end-of-training values live only in the summary, and
#: counters); a summary record naming none of them is skipped undecoded, which matters for
#: speed: wandb writes a summary record after every ``log()`` call.
SUMMARY_KEYS = ("train_samples_per_second", "train_steps_per_second", "total_flos")
#: What :func:`_summary` searches the file for: one search finds both rates; the Trainer
#: writes ``total_flos`` in the same log call, so it is looked for only where the rates are,
#: in the records after :data:`_NEAR` bytes before them (the whole file if not there).
_RATES = b"_per_second"
#: Keys of the HF Trainer's TrainingArguments, which its W&B callback puts in the run config.
_TRAINER_CONFIG = ("output_dir", "per_device_train_batch_size")
_FLOS = b"total_flos"
_NEAR = 1 << 20
#: Files beside the ``.wandb`` file that :func:`decode_leg` reads when present.
SIDE_FILES = ("files/config.yaml", "files/wandb-summary.json", "files/wandb-metadata.json")


@dataclass
class Leg:
    """What one run folder (or a lone ``.wandb`` file) holds."""

    folder: Path
    file: Path | None
    run: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    config_yaml: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    metrics: list[dict[str, str]] = field(default_factory=list)
    history: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=HISTORY_SCHEMA))
    exit: dict[str, int] | None = None
    output: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        match = RUN_DIR.match(self.folder.name)
        return self.run.get("run_id") or (match.group(2) if match else self.folder.name)

    @property
    def start_time(self) -> float | None:
        """Unix seconds the leg started: run record, environment record, metadata, folder name."""
        for value in (self.run.get("start_time"), self.environment.get("started_at")):
            if value:
                return float(value)
        for text, form in ((self.metadata.get("startedAt"), "%Y-%m-%dT%H:%M:%S.%f"),
                           (_folder_date(self.folder), "%Y%m%d_%H%M%S")):
            try:
                return datetime.strptime(str(text), form).timestamp() if text else None
            except ValueError:
                continue
        return None


def wandb_file(folder: Path) -> Path | None:
    """The ``run-<id>.wandb`` file of a run folder (any ``*.wandb`` when renamed)."""
    match = RUN_DIR.match(folder.name)
    if match and is_file(folder / f"run-{match.group(2)}.wandb"):
        return folder / f"run-{match.group(2)}.wandb"
    found = sorted(f for f in files_in(folder) if f.suffix == ".wandb")
    return found[0] if found else None


def decode_leg(path: Path, *, output: bool = False) -> Leg:
    """Decode a run folder or a ``.wandb`` file; ``output=True`` also keeps the console lines.

    Damage is reported as findings; raises :class:`InputError` only when the file cannot be
    read at all (permissions, I/O).
    """
    file = path if is_file(path) else wandb_file(path)
    leg = Leg(folder=path.parent if is_file(path) else path, file=file)
    if file is not None:
        _decode_file(leg, file, output=output)
    _read_side_files(leg)
    return leg


def _decode_file(leg: Leg, file: Path, *, output: bool) -> None:
    try:
        data = read_file(file)
    except OSError as exc:
        raise InputError(f"{file}: cannot be read ({exc.strerror}); check the path and "
                         "its permissions") from exc
    try:
        records = read_records(data)
    except HeaderError as exc:
        what = "is empty (the run wrote nothing yet)" if not data else str(exc)
        leg.findings.append(Finding("error", "damaged-input",
                                    f"{file}: {what}; skipped it (point runcompare at a W&B "
                                    "run folder holding a .wandb file written by wandb)"))
        return
    blob = records.blob
    starts, ends = records.starts, records.ends
    kinds, body_at, body_end = record_types(np.frombuffer(blob, np.uint8), starts, ends)
    damage = list(records.damage)
    for i in np.flatnonzero(kinds < 0).tolist():  # let the reference decoder decide
        try:
            found = record_kind(bytes(blob[starts[i]:ends[i]]))
        except ProtoError as exc:
            damage.append((int(records.offsets[i]), f"record not decodable ({exc}); skipped"))
            kinds[i] = 0
            continue
        kinds[i], body_at[i], body_end[i] = (0, 0, 0) if found is None else (
            found[0], starts[i] + found[2], starts[i] + found[3])
    history = np.flatnonzero(kinds == 2)
    leg.history, errors = decode_history(blob, body_at[history], body_end[history])
    damage += [(int(records.offsets[history[row]]), f"history record not decodable ({message})")
               for row, message in errors]
    wanted = [k for k, name in KINDS.items() if name in _SMALL
              or (output and name in ("output", "output_raw"))]
    chunks: list[str] = []
    for i in np.flatnonzero(np.isin(kinds, wanted)).tolist():
        try:
            _dispatch(leg, KINDS[int(kinds[i])], bytes(blob[body_at[i]:body_end[i]]), chunks)
        except (ProtoError, ValueError, TypeError) as exc:
            damage.append((int(records.offsets[i]), f"record not decodable ({exc}); skipped"))
    _summary(leg, blob, kinds, starts, body_at, body_end)
    leg.output = "".join(chunks).split("\n") if chunks else []
    if damage:
        leg.findings.append(_damage_finding(file, sorted(damage), len(records.starts)))


#: Record kinds decoded one by one (a few per run).
_SMALL = ("config", "metric", "run", "exit", "environment")


def _dispatch(leg: Leg, kind: str, body: bytes, chunks: list[str]) -> None:
    """File one record's body where it belongs."""
    if kind == "config":
        _apply(leg.config, *decode_items(body))
    elif kind == "run":
        run = decode_run(body)
        _apply(leg.config, run.pop("config", []), [])
        leg.run.update(run)
    elif kind == "metric":
        leg.metrics.append(decode_metric(body))
    elif kind == "environment":
        leg.environment.update(decode_environment(body))
    elif kind == "exit":
        leg.exit = decode_exit(body)
    else:  # output_raw / output
        chunks.append(decode_output(body)[2])


def _summary(leg: Leg, blob: Buffer, kinds: np.ndarray, starts: np.ndarray,
             body_at: np.ndarray, body_end: np.ndarray) -> None:
    """The last value of each of :data:`SUMMARY_KEYS`: search the bytes backwards for the key
    and decode only the summary records that name it (wandb writes one after every log()).

    Only the HF Trainer writes these, and it logs its TrainingArguments into the run config:
    a run whose config has none is not searched. A Trainer run without the rates (one that
    crashed) costs one search of the file, not one per key: ``total_flos`` is only looked for
    in a run that has them."""
    if not all(key in leg.config for key in _TRAINER_CONFIG):
        return
    rates = _search(leg, blob, _RATES, SUMMARY_KEYS[:2], 0, kinds, starts, body_at, body_end)
    if rates is None:
        return
    near = max(rates - _NEAR, 0)
    if _search(leg, blob, _FLOS, SUMMARY_KEYS[2:], near, kinds, starts, body_at,
               body_end) is None and near:
        _search(leg, blob, _FLOS, SUMMARY_KEYS[2:], 0, kinds, starts, body_at, body_end)


def _search(leg: Leg, blob: Buffer, needle: bytes, keys: tuple[str, ...], low: int,
            kinds: np.ndarray, starts: np.ndarray, body_at: np.ndarray,
            body_end: np.ndarray) -> int | None:
    """Set the last summary value of each of ``keys`` found in ``blob[low:]`` by searching
    backwards for ``needle``; the offset of the first hit in a summary record, or None."""
    missing = set(keys)
    limit, first = len(blob), None
    while missing and (hit := blob.rfind(needle, low, limit)) >= 0:
        i = int(np.searchsorted(starts, hit, side="right")) - 1
        limit = int(starts[i]) if i >= 0 else 0
        if i < 0 or kinds[i] != 3 or not body_at[i] <= hit < body_end[i]:
            continue
        first = hit if first is None else first
        try:
            updates, _ = decode_items(bytes(blob[body_at[i]:body_end[i]]))
        except ProtoError:
            continue
        for path, value in reversed(updates):
            key = "/".join(path)
            if key in missing:
                leg.summary[key] = _json(value)
                missing.discard(key)
    return first


def _apply(target: dict[str, Any], updates: list[tuple[tuple[str, ...], str]],
           removes: list[tuple[tuple[str, ...], str]]) -> None:
    """Set each ``path`` of ``target`` to its JSON value (nested dicts made as needed), then
    delete the removed paths."""
    for path, text in updates:
        node = target
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[path[-1]] = _json(text)
    for path, _ in removes:
        node = target
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                break
            node = child
        else:
            node.pop(path[-1], None)


def _json(text: str) -> Any:
    """The JSON value (``NaN``/``Infinity`` allowed), or the text itself when not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _damage_finding(file: Path, damage: list[tuple[int, str]], kept: int) -> Finding:
    offset, what = damage[0]
    more = f" and {len(damage) - 1} more place(s)" if len(damage) > 1 else ""
    return Finding("warning", "damaged-input",
                   f"{file}: damaged at byte {offset} ({what}){more}; kept the {kept} complete "
                   "records (a run that crashed or is still writing ends this way)")


def _read_side_files(leg: Leg) -> None:
    """``files/config.yaml``, ``wandb-summary.json`` and ``wandb-metadata.json`` when present."""
    files = leg.folder / "files"
    config = _load(files / "config.yaml", leg, yaml_file=True)
    if isinstance(config, dict):
        leg.config_yaml = {key: value.get("value") if isinstance(value, dict) else value
                           for key, value in config.items() if key != "wandb_version"}
    summary = _load(files / "wandb-summary.json", leg)
    if isinstance(summary, dict):
        leg.summary = {**{k: v for k, v in summary.items() if k in SUMMARY_KEYS},
                       **leg.summary}
    metadata = _load(files / "wandb-metadata.json", leg)
    if isinstance(metadata, dict):
        leg.metadata = metadata


def _load(path: Path, leg: Leg, *, yaml_file: bool = False) -> Any:
    """A side file's content, or None (with a finding when it exists but is damaged)."""
    if not is_file(path):
        return None
    import yaml  # 13 ms to import: only for a run that has a config.yaml

    try:
        text = path.read_text(encoding="utf-8", errors="replace")
        return yaml.safe_load(text) if yaml_file else json.loads(text)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        leg.findings.append(Finding("warning", "damaged-input",
                                    f"{path}: not readable ({exc.__class__.__name__}: "
                                    f"{str(exc).splitlines()[0] if str(exc) else ''}); "
                                    "ignored it"))
        return None


def _folder_date(folder: Path) -> str | None:
    match = RUN_DIR.match(folder.name)
    return match.group(1) if match else None
