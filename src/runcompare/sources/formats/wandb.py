"""W&B run folders (wandb/run-<date>-<id>/, wandb/offline-run-<date>-<id>/), read offline.

The ``.wandb`` file is decoded natively (no wandb package, no network): LevelDB-log framing in
``leveldb_log``, protobuf fields in ``wandb_proto``, history in bulk in ``wandb_history``.
A run resumed into the same id writes one folder per leg; :func:`read` numbers them in time
order and keeps every point of every leg (``legs.resolve_legs`` drops the orphaned ones).

The step: the step metric the run declared (``wandb.define_metric("*", step_metric=...)``,
e.g. the HF Trainer's ``train/global_step``) counts optimizer steps. Without one, W&B's own
``_step`` counts ``wandb.log()`` calls, which is said in a ``step-is-log-call`` warning.
``_timestamp`` gives the wall time; keys starting with ``_`` are W&B's own, not metrics.
"""

from __future__ import annotations

import fnmatch
import math
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ...errors import InputError
from ...model import RAW_SCHEMA, Fact, Finding, RawLog
from ..config import facts_from_config
from ._wandb_run import RUN_DIR, SIDE_FILES, Leg, decode_leg, wandb_file

__all__ = ["LOG_STEP", "expand", "files", "history_scalars", "output_lines", "read", "run_folders",
           "sniff"]

#: W&B's own log-call counter, the step of a history without a declared step metric.
LOG_STEP = "_step"
#: Summary keys that are facts: the HF Trainer's end-of-training values (W&B keeps them in
#: the summary, not the history) and counters.
_SUMMARY_FACTS = {"train_samples_per_second": "train_samples_per_second",
                  "train_steps_per_second": "train_steps_per_second",
                  "total_flos": "total_flos"}


def sniff(path: Path) -> bool:
    return bool(run_folders(path))


def files(path: Path) -> list[Path]:
    """The ``.wandb`` files and side files of every leg of the run at ``path``."""
    found: list[Path] = []
    for folder in run_folders(path):
        file = folder if folder.is_file() else wandb_file(folder)
        found += [file] if file is not None else []
        if folder.is_dir():
            found += [folder / name for name in SIDE_FILES if (folder / name).is_file()]
    return found


def expand(path: Path) -> list[Path]:
    """One root per W&B run under ``path`` (folders of one run id, a resume, count once).

    A run folder or ``.wandb`` file is one run. A ``wandb/`` folder (or a folder holding one)
    with several run ids gives each id's earliest folder; :func:`read` of that folder gathers
    the id's later folders as further legs.
    """
    if path.is_file() or _is_run_folder(path):
        return [path]
    groups: dict[str, list[Path]] = {}
    for folder in run_folders(path):
        groups.setdefault(_run_id(folder), []).append(folder)
    if len(groups) < 2:
        return [path]
    return [folders[0] for folders in groups.values()]


def run_folders(path: Path) -> list[Path]:
    """The run folders (legs) that make up the run at ``path``, oldest first.

    ``path`` may be a ``.wandb`` file (itself), a run folder (it and its siblings with the
    same run id), a ``wandb/`` folder or a folder holding ``wandb/`` (every run folder there;
    the ``latest-run`` link is not counted twice).
    """
    if path.is_file():
        return [path] if path.suffix == ".wandb" else []
    if not path.is_dir():
        return []
    if _is_run_folder(path):
        real = path.resolve()
        siblings = [f for f in _run_folders_in(real.parent) if _run_id(f) == _run_id(real)]
        return siblings or [real]
    for folder in (path, path / "wandb"):
        found = _run_folders_in(folder) if folder.is_dir() else []
        if found:
            return found
    return []


def _run_folders_in(folder: Path) -> list[Path]:
    seen: dict[Path, Path] = {}
    for child in sorted(folder.iterdir()):
        if RUN_DIR.match(child.name) and child.is_dir():
            seen.setdefault(child.resolve(), child)
    return sorted(seen.values(), key=lambda f: (f.name.split("run-", 1)[1], f.name))


def _is_run_folder(path: Path) -> bool:
    return path.is_dir() and (RUN_DIR.match(path.resolve().name) is not None
                              or (wandb_file(path) is not None
                                  and not any(path.glob("*/*.wandb"))))


def _run_id(folder: Path) -> str:
    match = RUN_DIR.match(folder.resolve().name)
    return match.group(2) if match else folder.name


def read(path: Path, *, hints: Mapping[str, object] | None = None) -> RawLog:
    """Every point of every leg of the W&B run at ``path``, its facts and findings.

    ``hints["step_metric"]`` (a user's ``--set step_metric=NAME``) overrides the step metric
    the run declared (``"_step"`` forces W&B's log-call counter).
    """
    step_metric = (hints or {}).get("step_metric")
    folders = run_folders(path)
    if not folders:
        raise InputError(f"{path}: no W&B run found (expected wandb/run-<date>-<id>/ or "
                         "wandb/offline-run-<date>-<id>/ holding a .wandb file)")
    legs = sorted((decode_leg(f) for f in folders), key=lambda leg: leg.start_time or 0.0)
    findings = [f for leg in legs for f in leg.findings]
    readable = [leg for leg in legs if not any(f.level == "error" for f in leg.findings)]
    if not readable:
        raise InputError(findings[0].message if findings else f"{path}: no readable W&B run")
    findings += _runs_merged(path, readable)
    scalars, unit, step_findings, chosen = history_scalars(
        readable, None if step_metric is None else str(step_metric), path)
    return RawLog(source="wandb", path=path, scalars=scalars, step_unit=unit,
                  facts=_facts(readable, scalars, chosen),
                  findings=findings + step_findings, files=files(path),
                  aliases={}, name=_display_name(readable))


def output_lines(path: Path) -> list[str]:
    """The console output the run(s) at ``path`` printed (``output_raw`` records, else
    ``files/output.log``), leg after leg, split at newlines; carriage returns are kept."""
    lines: list[str] = []
    for folder in run_folders(path):
        leg = decode_leg(folder, output=True)
        log = leg.folder / "files" / "output.log"
        if leg.output:
            lines += leg.output
        elif log.is_file():
            lines += log.read_text(encoding="utf-8", errors="replace").split("\n")
    return lines


def _display_name(legs: list[Leg]) -> str | None:
    names = [leg.run.get("display_name") for leg in legs if leg.run.get("display_name")]
    return names[-1] if names else None


def _runs_merged(path: Path, legs: list[Leg]) -> list[Finding]:
    """Say so when ``path`` holds several run ids that are read as legs of one run."""
    ids = list(dict.fromkeys(leg.run_id for leg in legs))
    if len(ids) < 2:
        return []
    dirs = {str(leg.config.get("output_dir")) for leg in legs}
    same_output = len(dirs) == 1 and "None" not in dirs
    why = (f"restarts of one Trainer output_dir {dirs.pop()!r}" if same_output
           else "separate runs")
    return [Finding("info" if same_output else "warning", "runs-merged",
                    f"{path}: {len(ids)} W&B runs ({', '.join(ids)}) read as consecutive legs "
                    f"of one run, in start order (they look like {why}); pass one run folder "
                    "to read a single run")]


def _definitions(legs: list[Leg]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Declared step metrics: exact names -> step metric, and (glob, step metric) pairs."""
    names: dict[str, str] = {}
    globs: list[tuple[str, str]] = []
    for metric in (m for leg in legs for m in leg.metrics):
        step = metric.get("step_metric")
        if step and metric.get("name"):
            names[metric["name"]] = step
        elif step and metric.get("glob_name"):
            globs.append((metric["glob_name"], step))
    return names, globs


def _declared_step(legs: list[Leg],
                   counts: Mapping[str, int]) -> tuple[str | None, dict[str, str | None]]:
    """The step metric declared for the most points (None: most points have none, so they are
    on ``_step``), and each metric's own declared step metric."""
    names, globs = _definitions(legs)
    per_metric: dict[str, str | None] = {}
    for key in counts:
        step = names.get(key)
        if step is None:
            step = next((s for g, s in reversed(globs) if fnmatch.fnmatchcase(key, g)), None)
        per_metric[key] = step
    votes: Counter[str | None] = Counter()
    for key, step in per_metric.items():
        if step != key:
            votes[step] += counts[key]
    chosen = votes.most_common(1)[0][0] if votes else None
    return chosen, per_metric


def _items(legs: list[Leg]) -> pl.DataFrame:
    """History items of all legs: leg, row, key, value (null when not a number)."""
    frames = [leg.history.with_columns(leg=pl.lit(i, pl.Int32)) for i, leg in enumerate(legs)]
    items = pl.concat(frames)
    # a JSON object is never a number: look for them only when some value is not one
    nested = items.filter(pl.col("value").is_null() & pl.col("value_json").str.starts_with("{")
                          & ~pl.col("key").str.starts_with("_")) \
        if items.get_column("value").null_count() else items.clear()
    if not nested.is_empty():  # the legacy writer kept nested dicts as one JSON object
        plain = items.filter(~pl.col("value_json").str.starts_with("{")).drop("value_json")
        return pl.concat([plain, _flatten(nested).select(plain.columns)]).sort(
            "leg", "row", maintain_order=True)
    return items.drop("value_json")


def _flatten(nested: pl.DataFrame) -> pl.DataFrame:
    """Numeric leaves of JSON objects as ``key/sub/leaf`` items (media objects skipped)."""
    import json

    rows: list[tuple[Any, ...]] = []

    def walk(leg: int, row: int, key: str, value: Any) -> None:
        if isinstance(value, dict) and "_type" not in value:
            for sub, inner in value.items():
                walk(leg, row, f"{key}/{sub}", inner)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            rows.append((row, key, leg, float(value)))

    for row, key, text, leg in nested.select("row", "key", "value_json", "leg").iter_rows():
        try:
            walk(leg, row, key, json.loads(text))
        except ValueError:
            continue
    return pl.DataFrame(rows, schema={"row": pl.Int64, "key": pl.String, "leg": pl.Int32,
                                      "value": pl.Float64}, orient="row")


def history_scalars(legs: list[Leg], override: str | None,
                    path: Path) -> tuple[pl.DataFrame, str, list[Finding], str]:
    """The points of the legs' history in RAW_SCHEMA, the step unit, findings about the step
    and the step key (``override``: the user's step metric; else the one declared)."""
    items = _items(legs)
    counts = {key: count for key, count in items.filter(pl.col("value").is_not_null())
              .group_by("key").len().iter_rows() if not key.startswith("_")}
    findings: list[Finding] = []
    declared, per_metric = _declared_step(legs, counts)
    step = override or declared
    if step is not None and step != LOG_STEP:
        problem = _step_problem(items, step)
        if problem and override:
            raise InputError(f"{path}: step_metric {step!r} {problem}; choose one of "
                             f"{', '.join(_candidates(counts) or sorted(counts)[:10])}")
        if problem:
            findings.append(Finding("warning", "step-metric-unusable",
                                    f"{path}: the declared step metric {step!r} {problem}; "
                                    "using W&B's _step instead"))
            step = None
    if step is None or step == LOG_STEP:
        step = LOG_STEP
        if override != LOG_STEP:
            findings.append(_log_call_finding(path, counts))
    others = sorted(k for k, s in per_metric.items() if (s or LOG_STEP) != step and k != step)
    if others:
        findings.append(Finding("info", "step-metric", f"{path}: {', '.join(others[:5])} "
                                f"declared another step metric; every metric is put on {step!r}"))
    frame, dropped = _points(items, legs, step)
    if dropped:
        findings.append(Finding("info", "before-first-step",
                                f"{path}: {dropped} points logged before the first {step!r} "
                                "value have no step and were dropped"))
    return frame, "log_call" if step == LOG_STEP else "optimizer", findings, step


def _step_problem(items: pl.DataFrame, step: str) -> str | None:
    """Why ``step`` cannot be the step column, or None when it can."""
    values = items.filter(pl.col("key") == step).get_column("value").drop_nulls()
    if values.is_empty():
        return "is not in the history"
    finite = values.filter(values.is_finite())
    if finite.len() < values.len() or (finite != finite.round()).any():
        return "has values that are not whole numbers"
    return None


def _candidates(counts: Mapping[str, int]) -> list[str]:
    return sorted(k for k in counts if "step" in k.lower() or "iter" in k.lower())[:5]


def _log_call_finding(path: Path, counts: Mapping[str, int]) -> Finding:
    hint = _candidates(counts)
    keys = f" (candidates: {', '.join(hint)})" if hint else ""
    return Finding("warning", "step-is-log-call",
                   f"{path}: the W&B run declares no step metric, so its step is _step, which "
                   "counts wandb.log() calls, not optimizer steps (logging train and eval "
                   "metrics in separate calls advances it twice); if a logged key counts "
                   f"optimizer steps{keys}, pass --set step_metric=KEY, or declare it in the "
                   "script: wandb.define_metric('*', step_metric=KEY)")


def _points(items: pl.DataFrame, legs: list[Leg], step: str) -> tuple[pl.DataFrame, int]:
    """One row per metric value with its row's step and wall time; a row without the step
    key takes the leg's last step value before it (W&B's step_sync), and points logged
    before a leg's first step value are dropped and counted.

    ``items`` are in (leg, row) order, so every history row of every leg gets a slot in small
    numpy tables (one entry per record): the step, ``_timestamp`` and ``_runtime`` values are
    put in them, the step is carried forward to the slots without one, and each point reads
    its row's slot, with no join. A record holding one of those keys twice takes
    :func:`_points_joined`."""
    key, value = pl.col("key"), pl.col("value")
    offset = np.zeros(len(legs) + 1, np.int64)
    if not items.is_empty():  # each leg's items are together: the largest row of each
        leg, row = items.get_column("leg").to_numpy(), items.get_column("row").to_numpy()
        first = np.flatnonzero(np.r_[True, leg[1:] != leg[:-1]])
        sizes = np.zeros(len(legs), np.int64)
        sizes[leg[first]] = np.maximum.reduceat(row, first) + 1
        offset[1:] = np.cumsum(sizes)
    slots = int(offset[-1])

    def slot_of(frame: pl.DataFrame) -> np.ndarray:
        row = frame.get_column("row").to_numpy()
        return row + offset[frame.get_column("leg").to_numpy()] if len(legs) > 1 else row

    tables: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    internal = items.filter(key.is_in([step, "_timestamp", "_runtime"]) & value.is_not_null())
    for name in (step, "_timestamp", "_runtime"):
        found = internal.filter(key == name)
        at = slot_of(found)
        if len(at) and np.bincount(at, minlength=slots).max() > 1:
            return _points_joined(items, legs, step)
        has = np.zeros(slots, bool)
        has[at] = True
        table = np.zeros(slots, np.float64)
        table[at] = found.get_column("value").to_numpy()
        tables[name] = (table, has)
    # the step of each slot: that of the last slot at or before it with a step value
    source = np.maximum.accumulate(np.where(tables[step][1], np.arange(slots), -1)) \
        if slots else np.zeros(0, np.int64)
    points = items.filter(~key.str.starts_with("_") & (key != step) & value.is_not_null())
    at = slot_of(points)
    found = source[at]
    has_step = found >= 0
    if len(legs) > 1:  # only a step of the point's own leg counts
        slot_leg = np.repeat(np.arange(len(legs)), np.diff(offset))
        has_step &= slot_leg[np.maximum(found, 0)] == points.get_column("leg").to_numpy()
    dropped = int(len(found) - np.count_nonzero(has_step))
    if dropped:
        points, at, found = points.filter(pl.Series(has_step)), at[has_step], found[has_step]
    stamp, has_time = tables["_timestamp"][0][at], tables["_timestamp"][1][at]
    starts = np.array([np.nan if leg.start_time is None else leg.start_time for leg in legs])
    known = np.array([leg.start_time is not None for leg in legs], bool)
    point_leg = points.get_column("leg").to_numpy()
    runtime, has_runtime = tables["_runtime"][0][at], tables["_runtime"][1][at]
    wall = np.where(has_time, stamp, starts[point_leg] + runtime)
    wall_time = pl.Series("wall_time", wall)
    missing = ~has_time & ~(has_runtime & known[point_leg])
    if missing.any():
        wall_time = wall_time.set(pl.Series(missing), None)  # type: ignore[arg-type]
    frame = points.select(
        metric=key, value=value, step=pl.Series(tables[step][0][found]).round().cast(pl.Int64),
        wall_time=wall_time, leg=pl.col("leg"))
    return frame.cast(RAW_SCHEMA), dropped  # type: ignore[arg-type]


def _points_joined(items: pl.DataFrame, legs: list[Leg], step: str) -> tuple[pl.DataFrame, int]:
    """:func:`_points` with polars joins: also right when a record holds the step,
    ``_timestamp`` or ``_runtime`` key more than once (and the reference for :func:`_points`)."""
    key, value = pl.col("key"), pl.col("value")
    starts = {i: leg.start_time for i, leg in enumerate(legs)}
    # one sorted integer per history row of every leg, for cheap joins
    items = items.with_columns(row=pl.col("leg").cast(pl.Int64) * (1 << 40) + pl.col("row"))
    internal = items.filter(key.is_in([step, "_timestamp", "_runtime"]) & value.is_not_null())

    def column(name: str, alias: str) -> pl.DataFrame:
        return internal.filter(key == name).select("row", value.alias(alias))

    steps = internal.filter(key == step).select("row", step_leg=pl.col("leg"), step=value)
    points = (items.filter(~key.str.starts_with("_") & (key != step) & value.is_not_null())
              .join_asof(steps, on="row", strategy="backward", check_sortedness=False)
              .join(column("_timestamp", "wall_time"), on="row", how="left",
                    maintain_order="left")
              .join(column("_runtime", "runtime"), on="row", how="left", maintain_order="left"))
    has_step = pl.col("step").is_not_null() & (pl.col("step_leg") == pl.col("leg"))
    dropped = points.height - int(points.select(has_step.sum()).item())
    start = pl.col("leg").replace_strict(starts, default=None, return_dtype=pl.Float64)
    frame = points.filter(has_step).select(
        metric=key, value=value, step=pl.col("step").round().cast(pl.Int64),
        wall_time=pl.coalesce("wall_time", start + pl.col("runtime")), leg=pl.col("leg"))
    return frame.cast(RAW_SCHEMA), dropped  # type: ignore[arg-type]


def _facts(legs: list[Leg], scalars: pl.DataFrame, step: str) -> dict[str, Fact[Any]]:
    """Config, summary, metadata and run-record facts; later legs and sources win ties."""
    facts: dict[str, Fact[Any]] = {}
    yaml_config = {k: v for leg in legs for k, v in leg.config_yaml.items() if k != "_wandb"}
    config = {k: v for leg in legs for k, v in leg.config.items() if k != "_wandb"}
    for where, values in (("wandb config.yaml", yaml_config), ("wandb config", config)):
        facts.update(_nested_facts(values, where))
        facts.update(facts_from_config(values, where=where, kind="config"))
    summary = {k: v for leg in legs for k, v in leg.summary.items()}
    for key, name in _SUMMARY_FACTS.items():
        value = summary.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) \
                and math.isfinite(value) and value > 0:
            facts[name] = Fact(value, f"wandb summary: {key}", "logged")
    tokens = scalars.filter(pl.col("metric") == "train/num_input_tokens_seen")["value"].max()
    if isinstance(tokens, float) and math.isfinite(tokens) and tokens > 0:
        facts["tokens_seen"] = Fact(int(tokens), "wandb history: last "
                                    "train/num_input_tokens_seen", "logged")
    if step != LOG_STEP and not scalars.is_empty():
        facts["global_step"] = Fact(int(scalars.get_column("step").max()),  # type: ignore[arg-type]
                                    f"wandb history: last {step}", "logged")
    if "world_size" not in facts:
        facts.update(_gpu_hint(legs))
    start = next((leg.start_time for leg in legs if leg.start_time), None)
    if start is not None:
        facts["start_time"] = Fact(start, "wandb run record: start_time", "logged")
    return facts


def _nested_facts(config: Mapping[str, Any], where: str) -> dict[str, Fact[Any]]:
    """Facts from keys inside nested config sections (``data.seq_len``), when a leaf name
    occurs only once; top-level keys override them."""
    leaves: dict[str, list[tuple[str, Any]]] = {}

    def walk(prefix: str, node: Mapping[str, Any]) -> None:
        for key, value in node.items():
            if isinstance(value, Mapping):
                walk(f"{prefix}{key}.", value)
            elif prefix:
                leaves.setdefault(str(key), []).append((f"{prefix}{key}", value))

    walk("", config)
    unique = {leaf: found[0] for leaf, found in leaves.items() if len(found) == 1}
    facts = facts_from_config({leaf: value for leaf, (_, value) in unique.items()},
                              where=where, kind="config")
    return {name: Fact(fact.value, f"{where}: {unique[fact.source.rsplit(': ', 1)[1]][0]}",
                       "config") for name, fact in facts.items()}


def _gpu_hint(legs: list[Leg]) -> dict[str, Fact[Any]]:
    """GPUs on the machine as a world-size hint (not the world size: one process may use
    them all, or several hosts may train together)."""
    for leg in reversed(legs):
        for where, count in (("wandb environment record", leg.environment.get("gpu_count")),
                             ("wandb-metadata.json", leg.metadata.get("gpu_count"))):
            if isinstance(count, int) and not isinstance(count, bool) and count >= 1:
                return {"world_size": Fact(count, f"{where}: gpu_count (a hint: GPUs on the "
                                                  "first host, not necessarily the world size)",
                                           "hint")}
    return {}
