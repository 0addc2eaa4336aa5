"""HF Trainer output dir: trainer_state.json at its root or in checkpoint-N/ (or the Hub's
last-checkpoint/).

``log_history`` entries carry ``step`` = global_step, the optimizer step. Each key is renamed
as the Trainer names it in TensorBoard (``eval_x`` -> ``eval/x``, ``test_x`` -> ``test/x``,
others -> ``train/x``). Facts: ``train_batch_size`` (the per-process micro-batch, not the
global batch), ``max_steps``, ``logging_steps``, ``eval_steps``, ``global_step``, the final
``num_input_tokens_seen`` and the end-of-training rates from which ``resolve`` may infer the
global batch. ``training_args.bin`` is a pickle and is never loaded. The native reader of
:mod:`._hf_trainer_json` reads a well-formed state (and its log history into columns) in C;
any other is read by ``json.loads`` here, with the same results.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ...errors import InputError
from ...facts import fact_value, finite_number
from ...model import RAW_SCHEMA, Fact, Finding, RawLog, framed, repeated
from ..codecs.files import (
    LFS_POINTER,
    files_in,
    folders_in,
    is_dir,
    is_file,
    lfs_message,
    roots_under,
)
from ..format import Format
from ..naming import canonical
from . import _hf_trainer_json

__all__ = ["FORMAT", "expand", "files", "read", "read_files"]

STATE = "trainer_state.json"
#: checkpoint-N/, and last-checkpoint/ (the Hub's layout with hub_strategy="checkpoint").
_CHECKPOINT = re.compile(r"checkpoint-(\d+)|last-checkpoint")
#: Keys of a log entry that are not metrics.
_NOT_METRICS = {"step"}
#: Top-level keys of trainer_state.json reported as facts, with the fact name.
_STATE_FACTS = {"train_batch_size": "per_device_batch", "max_steps": "max_steps",
                "logging_steps": "logging_steps", "eval_steps": "eval_steps",
                "global_step": "global_step", "num_input_tokens_seen": "tokens_seen",
                "total_flos": "total_flos"}
_RATES = ("train_samples_per_second", "train_steps_per_second")
#: A log history: the entries json.loads gives, or the native reader's columns.
History = list[Any] | _hf_trainer_json.Columns


def read(path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog:
    """Read the most complete trainer_state.json under ``path`` (most steps, then most entries).

    ``hints`` (user facts) change nothing here: the file says what it needs to.
    """
    findings: list[Finding] = []
    states = []
    for file in files(path):
        state, damage = _load(file)
        if damage is not None:
            findings.append(damage)
        if state is not None:
            states.append((file, *state))
    if not states:
        raise InputError(findings[0].message if findings else f"{path}: no {STATE} found")
    file, fields, history = max(states, key=lambda item: (_int(item[1].get("global_step")),
                                                          len(item[2])))
    findings += _other_runs(file, history, states)
    scalars, aliases, codes = _scalars(history)
    facts = {**_model_config_facts(path), **_facts(fields, history, file)}
    raw = RawLog(path=path, scalars=scalars, step_unit="optimizer",
                 facts=facts, findings=findings, files=[f for f, _, _ in states],
                 aliases=aliases)
    if codes is not None:
        raw.tell_codes(*codes)
    return raw


def _other_runs(chosen: Path, history: History,
                states: list[tuple[Path, dict[str, Any], History]]) -> list[Finding]:
    """A warning naming the states whose log history is not a beginning of the one read: the
    checkpoints of another run saved into the same folder."""
    others = [file for file, _, other in states
              if file != chosen and not _hf_trainer_json.is_start(other, history)]
    if not others:
        return []
    shown = ", ".join(f.parent.name if f.parent != chosen.parent else f.name for f in others[:3])
    return [Finding("warning", "mixed-runs",
                    f"{chosen.parent}: {len(others)} checkpoint state(s) ({shown}) hold a log "
                    f"history that is not the start of {chosen.relative_to(chosen.parent.parent)}'s"
                    ": checkpoints of another run were saved into this folder; only "
                    f"{chosen.name} of {chosen.parent.name} is read, pass the other run's "
                    "checkpoint folder to compare it")]


def _model_config_facts(path: Path) -> dict[str, Fact[Any]]:
    """The transformers version from the model's config.json beside the state (plain JSON)."""
    config = _config_file(path)
    if not is_file(config):  # absent, or a FIFO that would block the read
        return {}
    try:
        version = json.loads(config.read_text(encoding="utf-8")).get("transformers_version")
    except (OSError, ValueError, AttributeError, RecursionError):
        return {}
    if not isinstance(version, str):
        return {}
    return {"transformers_version": Fact(version, "config.json: transformers_version", "config")}


def files(path: Path) -> list[Path]:
    """trainer_state.json at the root and in each checkpoint-N/ (and last-checkpoint/), in
    step order; those of the one output dir further down when ``path`` is none and holds one
    (``run/results/checkpoint-500/``)."""
    own = _own_files(path)
    if own or not is_dir(path):
        return own
    below = roots_under(path, lambda folder: bool(_own_files(folder)))
    return _own_files(below[0]) if len(below) == 1 else []


def _own_files(path: Path) -> list[Path]:
    """:func:`files` of an output dir itself."""
    try:
        if is_file(path):
            return [path] if path.name == STATE else []
        if not is_dir(path):
            return []
    except OSError:  # a folder under one this user may not read
        return []
    # from the folders' listings, which a folder this user may not read leaves empty
    found = [file for file in files_in(path) if file.name == STATE]
    checkpoints = [file for folder in folders_in(path) if _CHECKPOINT.fullmatch(folder.name)
                   for file in files_in(folder) if file.name == STATE]
    return found + sorted(checkpoints, key=_order)


def expand(path: Path) -> list[Path]:
    """The output dirs at ``path``: itself when it is one, else the folders under it that are
    (a folder of runs, nested at any depth up to :func:`~..codecs.files.roots_under`'s
    bound), in name order level by level."""
    if _own_files(path):
        return [path]
    if not is_dir(path):
        return []
    return roots_under(path, lambda folder: bool(_own_files(folder)))


def _order(state: Path) -> int:
    """The step in a checkpoint folder's name (last-checkpoint/ after every numbered one)."""
    number = _CHECKPOINT.fullmatch(state.parent.name).group(1)  # type: ignore[union-attr]
    return int(number) if number else 1 << 62


def read_files(path: Path) -> list[Path]:
    """Every file :func:`read` reads: the :func:`files` and, beside them, the model's
    config.json (none when there is no trainer_state.json)."""
    states = files(path)
    config = _config_file(path)
    return states + ([config] if states and is_file(config) else [])


def _config_file(path: Path) -> Path:
    return (path if is_dir(path) else path.parent) / "config.json"


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _load(file: Path) -> tuple[tuple[dict[str, Any], History] | None, Finding | None]:
    """The parsed state (its fields, and its log history apart), or what can be salvaged of a
    damaged one, and a finding saying where."""
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise InputError(f"{file}: cannot be read ({exc.strerror})") from exc
    pointer = lfs_message(file, data[:len(LFS_POINTER)])
    if pointer is not None:
        return None, Finding("error", "lfs-pointer", pointer)
    native = _hf_trainer_json.parse(data, "log_history", "step", _RATES)
    if native is not None:
        return native, None
    state, damage = _load_text(file, _text(data))
    if state is None:
        return None, damage
    return (state, state.pop("log_history", None) or []), damage


def _text(data: bytes) -> str:
    """``data`` as ``Path.read_text(encoding="utf-8", errors="replace")`` reads it (newlines
    too)."""
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace").read()


def _load_text(file: Path, text: str) -> tuple[dict[str, Any] | None, Finding | None]:
    """The parsed state by ``json.loads``, or what can be salvaged of a damaged one."""
    try:
        state = json.loads(text)
    except RecursionError:
        return None, Finding("error", "damaged-input",
                             f"{file}: nested deeper than a JSON reader follows; not a "
                             "trainer_state.json the Trainer writes")
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno} (byte {exc.pos})"
        salvaged = _salvage(text)
        if salvaged is None:
            return None, Finding("error", "damaged-input",
                                 f"{file}: not valid JSON at {where}: {exc.msg}; "
                                 "restore the file or point runcompare at another checkpoint")
        return salvaged, Finding(
            "warning", "damaged-input",
            f"{file}: damaged at {where} ({exc.msg}); kept the "
            f"{len(salvaged['log_history'])} complete log_history entries around the damage")
    if not isinstance(state, dict) or not isinstance(state.get("log_history", []), list):
        return None, Finding("error", "damaged-input",
                             f"{file}: not a trainer_state.json (no log_history list); "
                             "point runcompare at the Trainer's output_dir")
    return state, None


def _salvage(text: str) -> dict[str, Any] | None:
    """The complete ``log_history`` entries (and scalar fields) around the damage, if any."""
    start = text.find('"log_history"')
    bracket = text.find("[", start)
    if start < 0 or bracket < 0:
        return None
    decoder = json.JSONDecoder()
    entries: list[Any] = []
    pos = bracket + 1
    while pos < len(text) and text[pos] != "]":
        pos = _skip(text, pos, " \t\r\n,")
        try:
            entry, pos = decoder.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError):
            # resync at the next entry's opening brace: the entries after the damage are
            # read too (a stretch of zeros or garbage in the middle loses only what it hit)
            pos = text.find("{", pos + 1)
            if pos < 0:
                break
            continue
        entries.append(entry)
    fields = re.findall(r'^\s*"(\w+)":\s*(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*,?\s*$', text,
                        re.MULTILINE)
    state: dict[str, Any] = {}
    for key, value in fields:
        with suppress(ValueError):  # a number JSON refuses (0100) is no field to keep
            state[key] = json.loads(value)
    state["log_history"] = [e for e in entries if isinstance(e, dict)
                            and isinstance(e.get("step"), int)]  # entries, not other dicts
    return state


def _skip(text: str, pos: int, chars: str) -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _scalars(history: History) -> tuple[pl.DataFrame, dict[str, str],
                                        tuple[list[str], np.ndarray] | None]:
    """One row per number of each entry with a whole-number step; the keys are named once
    each (not once per entry), in the order they first appear; also, for a history read
    natively, the metric column's names and codes (``RawLog.tell_codes``)."""
    if isinstance(history, _hf_trainer_json.Columns):
        names = {key: canonical(key) for key in history.keys}
        metrics = list(names.values())
        metric = pl.Series("metric", metrics, dtype=pl.String)[history.key]  # gather, no query
        return (*_frame(metric, history.value, history.step, names), (metrics, history.key))
    keys: list[str] = []
    values: list[float] = []
    steps: list[int] = []
    numbers = _NUMBERS
    for entry in history:
        if not isinstance(entry, dict):
            continue
        step = entry.get("step")
        if type(step) is not int or not _INT64[0] <= step <= _INT64[1]:
            continue  # no step, a bool or a step no int64 holds: no point of a whole step
        for key, value in entry.items():
            if type(value) in numbers and key not in _NOT_METRICS:
                keys.append(key)
                values.append(value)
                steps.append(step)
    names = {key: canonical(key) for key in dict.fromkeys(keys)}
    metric = pl.Series("metric", keys, dtype=pl.String).replace_strict(names,
                                                                       return_dtype=pl.String)
    value = pl.Series("value", values, dtype=pl.Float64, strict=False)
    if value.null_count():  # an integer no float holds (a 400-digit count): ±inf, as it overflows
        value = pl.Series("value", [_as_float(v) for v in values], dtype=pl.Float64)
    return (*_frame(metric, value, pl.Series("step", steps, dtype=pl.Int64), names), None)


def _as_float(value: float) -> float:
    """``value`` as a float; an integer past a float's range as the infinity of its sign.

    >>> _as_float(3), _as_float(-10 ** 400)
    (3.0, -inf)
    """
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _frame(metric: pl.Series, value: pl.Series | np.ndarray, step: pl.Series | np.ndarray,
           names: dict[str, str]) -> tuple[pl.DataFrame, dict[str, str]]:
    """The scalars frame of the rows' canonical metric names, values and steps (no wall
    times, one leg), and the aliases (canonical name -> key as logged) of ``names`` (key ->
    canonical name)."""
    size = len(metric)
    frame = framed({
        "metric": metric, "value": value, "step": step,
        "wall_time": repeated(None, size, RAW_SCHEMA["wall_time"]),
        "leg": np.zeros(size, np.int32)}, RAW_SCHEMA)
    return frame, {name: key for key, name in names.items()}


#: The steps an entry may have (an int64 column holds them).
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: The types of the numbers JSON holds (``bool`` is not one of them, though it is an int).
_NUMBERS = frozenset({int, float})


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _state_value(name: str, value: Any) -> Any:
    """A top-level field as its fact holds it, None when it is none (a batch size of 1e-320
    or ``Infinity``): the step whole and ≥ 0 (0 before the first update), the others as a
    config's (:func:`~..config.fact_value`)."""
    if name == "global_step":
        whole = finite_number(value) and float(value).is_integer() and value >= 0
        return int(value) if whole else None
    return fact_value(name, value)


def _facts(state: dict[str, Any], history: History, file: Path) -> dict[str, Fact[Any]]:
    where = f"{file.parent.name}/{STATE}" if _CHECKPOINT.search(file.parent.name) else STATE
    facts: dict[str, Fact[Any]] = {}
    for key, name in _STATE_FACTS.items():
        value = _state_value(name, state.get(key))
        if value is not None:
            facts[name] = Fact(value, f"{where}: {key}", "logged")
    summary = _summary(history)
    if summary is not None:
        for key in _RATES:
            if finite_number(summary[key]):
                facts[key] = Fact(summary[key], f"{where}: log_history[step {summary.get('step')}]"
                                  f".{key}", "logged")
    return facts


def _summary(history: History) -> dict[str, Any] | None:
    """The last entry holding both end-of-training rates as numbers."""
    if isinstance(history, _hf_trainer_json.Columns):
        return _hf_trainer_json.marked(history)
    return next((e for e in reversed(history) if isinstance(e, dict) and _RATES[0] in e
                 and all(_is_number(e.get(k)) for k in _RATES)), None)


FORMAT = Format(
    "hf-trainer",
    "an HF Trainer output dir (or a folder of them): trainer_state.json at its root or in "
    "checkpoint-N/",
    read=read, files=read_files, sniff=lambda path: bool(expand(path)), expand=expand)
