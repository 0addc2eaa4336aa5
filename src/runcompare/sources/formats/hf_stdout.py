"""HF Trainer stdout: the dicts the Trainer prints (``{'loss': ..., 'epoch': ...}``) in a log file.

transformers 4.x prints numbers (``{'loss': 2.3456, ...}``), 5.x strings of 4 significant
digits (``{'loss': '2.346', ...}``); both are read, also when glued to tqdm ``\\r`` redraws or
ANSI cursor codes. Dicts are told apart by their keys: ``train_runtime`` -> end-of-training
summary, ``eval_*`` -> evaluation, ``test_*``/``predict_*`` -> test, ``loss`` -> train log.
Keys are named in the Trainer's dialect (:data:`~runcompare.sources.naming.TRAINER`: (``loss`` -> ``train/loss``,
``eval_loss`` -> ``eval/loss``, ``epoch`` -> ``train/epoch``). A dict with a value that is not a
number is skipped whole and reported.

The dicts carry no step. Each gets, in this order:

1. the count of the progress bar that tqdm redraws right after printing it (the first bar at
   the start of the next line, past up to 4 blank lines: a paste with a blank line after
   every line). The bar counts optimizer steps (total = "Total optimization
   steps"), or micro-steps when its total is that × "Gradient Accumulation steps". Not used in
   a leg whose dicts come in blocks with no bar between them: stdout was block-buffered
   (``python train.py > log`` without ``-u``), so the dicts landed far from their bars;
2. counting: the k-th train log of a leg is at step (start // L + k) × L, start being the
   resume step and L ``logging_steps`` (hint, i.e. ``--set``/runcompare.toml; else the epoch
   advance between train logs × "Num update steps per epoch", when the log prints it, as an
   ``inferred`` value; before that, a ``logging_steps=N`` the log prints, as a
   TrainingArguments dump does, ``logging-steps-from-log``); evaluations likewise with
   ``eval_steps``, else the step of the train
   log just before them when both print the same epoch;
3. a train log without either, after others that have one, is one logging interval after
   the one before (a log cut right after a dict); the summary is at "Total optimization
   steps" (else the last step of its leg); other dicts take the step before them.

A ``trainer.state.log_history`` the script prints (a list of the dicts, each with its
``step``) is the Trainer's own record: where its entries, counted from the end, match the
printed dicts one for one in kind and epoch, their steps replace what the above gave (a paste
that lost bar redraws; ``steps-from-log-history``), except steps the user stated. The list's
dicts are not new entries.

A train log left without a step raises :class:`MissingInfoError` naming
``--set logging_steps=N``. Steps are checked against the logged epoch: it must advance evenly,
at 1 ÷ "Num update steps per epoch" per step when the log prints that (``epoch-mismatch``).

Legs: each ``***** Running training *****`` block starts one (without INFO logging: the
training bar starting again at 0); "Continuing training from global step N" (4.x) or
"Resuming training from checkpoint with epoch E and global step N" (5.x) makes it start at
N + 1. Facts (kind ``logged``) come from the INFO block of the last leg; the summary's rates
only when no global batch is printed (5.x rounds them to 4 digits).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from ...errors import InputError
from ...model import RAW_SCHEMA, Fact, Finding, RawLog
from ..format import Format
from ..naming import canonical_names
from ..textlog import layout as _layout
from ..textlog.damage import unparsed_finding
from ..textlog.layout import Layout, Piece
from ..textlog.lines import Parsed, in_order, read_lines
from ..textlog.logs import logs_at
from ..textlog.points import number_legs, to_raw
from . import _hf_stdout_steps
from ._hf_stdout_dicts import DICT_KEYS, keys_of, read_dicts

__all__ = ["FORMAT", "claims", "read"]


LAUNCH = "***** Running training *****"
#: INFO block labels -> fact names.
INFO = {
    "Num examples": "num_examples", "Num Epochs": "num_epochs",
    "Num update steps per epoch": "steps_per_epoch",
    "Instantaneous batch size per device": "per_device_batch",
    "Total train batch size (w. parallel, distributed & accumulation)": "global_batch",
    "Gradient Accumulation steps": "grad_accum", "Total optimization steps": "max_steps",
    "Number of trainable parameters": "trainable_parameters",
    # unsloth's banner, which it prints in place of the Trainer's INFO block
    "Batch size per device": "per_device_batch", "Gradient accumulation steps": "grad_accum",
    "Total steps": "max_steps", "Total batch size": "global_batch",
}
#: Labels printed with their arithmetic after them (unsloth's "Total batch size (2 x 2 x 1)").
_WORKED = r"(?: \([\d x*×]+\))?"
_INFO = "(?<label>" + "|".join(k.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")
                               for k in INFO) + rf"){_WORKED} = (?<amount>[\d,]+)"
_RESUME = r"(?:Continuing training from|Resuming training from checkpoint with epoch \d+ and) " \
          r"global step (\d+)"
_BAR = r"(?<n>\d+)/(?<total>\d+) \["
_RATES = ("train_samples_per_second", "train_steps_per_second")
#: ``logging_steps=500,`` / ``eval_steps=100`` of a printed TrainingArguments (its repr, one
#: field a line, or an argparse namespace on one line); ``eval_steps=None`` is no value.
_ARG = r"(?:^|[\s,(])(?<key>logging_steps|eval_steps)=(?<value>\d+)(?:[,)]|\s|$)"


def claims(head: str) -> bool:
    """Whether a file's beginning holds the Trainer's INFO block or one of its log dicts."""
    return LAUNCH in head or any(key in head for key in DICT_KEYS)



def read(path: Path, *, hints: Mapping[str, object] | None = None,
         claims: Callable[[str], bool] = claims) -> RawLog:
    """Every point of the Trainer stdout at ``path`` (a log file, or a run folder's logs)."""
    logs = logs_at(path, claims, missing="no HF Trainer stdout found (a .log/.out/.txt "
                          "file with the Trainer's dicts such as {'loss': ...} or its '***** "
                          "Running training *****' block)")
    parts: dict[str, list[pl.DataFrame]] = {
        name: [] for name in ("events", "pairs", "values", "marks", "blank", "args")}
    findings: list[Finding] = []
    for index, file in enumerate(logs):
        lines = read_lines(file, _parse, layout=_dict_layout, merge=_merge)
        offset = pl.col("line") + (index << 40)
        parts["events"].append(lines.tables["events"].with_columns(pos=offset))
        parts["pairs"].append(lines.tables["pairs"].with_columns(pos=offset).drop("line"))
        parts["values"].append(lines.tables.get("values", _NO_VALUES).with_columns(pos=offset)
                               .drop("line"))
        parts["marks"].append(lines.tables["marks"].with_columns(pos=offset).drop("line"))
        parts["blank"].append(lines.tables["blank"].select(pos=offset))
        parts["args"].append(lines.tables["args"].with_columns(pos=offset))
        findings += lines.findings(file)
    # each chunk's events are in (line, off) order, and chunks and files come in order; one
    # copy into whole columns makes the many passes over the events cheaper
    events = pl.concat(parts["events"], how="diagonal_relaxed", rechunk=True)
    marks = pl.concat(parts["marks"], rechunk=True)
    blank = pl.concat(parts["blank"]).get_column("pos").to_numpy()
    return _assemble(path, logs, _with_bars(events, marks, blank), marks,
                     pl.concat(parts["pairs"]),
                     pl.concat(parts["values"], how="diagonal_relaxed", rechunk=True),
                     findings, dict(hints or {}), _printed_args(pl.concat(parts["args"])))


def _parse(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Per chunk: one row per event (a dict with its kind and epoch; INFO, launch and resume
    lines; a bar restarting at 0), one row per dict entry (``key``, ``value``), and one mark
    per line holding a dict or a progress bar (``has_dict``, the count ``n`` and ``total`` of
    its first bar). Lines of nothing but bar redraws, most of a long log, are only scanned for
    literals and their first bar."""
    text = pl.col("text")
    before = text.str.split_exact("{'", 0).struct.field("field_0")
    # a dict inside a printed list, call or assignment (trainer.state.log_history,
    # TrainOutput(..., metrics={...})) repeats what was logged: not a log entry
    has_dict = text.str.contains("{'", literal=True) & ~before.str.contains(r"[\[=(,]\s*$")
    # each regex of the other events holds a literal: only lines holding it are searched
    hints = {"reset": text.str.contains("| 0/", literal=True),
             "info": text.str.contains(" = ", literal=True),
             "launch": text.str.contains(LAUNCH, literal=True),
             "resume": text.str.contains("global step", literal=True)}
    frame = frame.with_columns(
        bar=before.str.extract_groups(_BAR), has_dict=has_dict,
        bar_before=before.str.contains("it/s", literal=True)
        | before.str.contains("s/it", literal=True),
        other=pl.any_horizontal(*hints.values()))
    # a log pasted without its \r: the bar printed right before the dict on its line is its own
    pasted = pl.col("has_dict") & ~text.str.contains("\r", literal=True) \
        & before.str.contains(r"\d+/\d+ \[[^\]]*\]\s*$")
    # a count too large for 64 bits (a garbled bar) is no count: null, not an error
    marks = frame.select("line", "has_dict",
                         n=pl.col("bar").struct.field("n").cast(pl.Int64, strict=False),
                         total=pl.col("bar").struct.field("total").cast(pl.Int64, strict=False),
                         pasted=pasted)
    marks = marks.filter(pl.col("has_dict") | pl.col("n").is_not_null())
    rows = frame.filter(pl.col("has_dict") | pl.col("other"))
    dicts, pairs = read_dicts(rows.filter("has_dict"))
    # a printed trainer.state.log_history: the Trainer's own record of each dict's step
    listed = text.str.contains(r"^\s*\[\{'") & text.str.contains("'step': ", literal=True)
    history = frame.filter(listed)
    if history.height:
        history = read_dicts(history)[0].filter(~pl.col("bad")).select(
            "line", "off", "kind", "epoch", "own_step", ev=pl.lit("history"))
    reset = text.str.extract(r"\| 0/(\d+) \[", 1).cast(pl.Int64, strict=False)
    others = rows.filter("other").select(  # a line may hold several labels (unsloth's)
        "line", off=pl.lit(-2, pl.Int64), reset=reset,
        launch=text.str.contains(LAUNCH, literal=True), info=text.str.extract_all(_INFO),
        resume=text.str.extract(_RESUME, 1).cast(pl.Int64, strict=False)
    ).explode("info", empty_as_null=True)
    others = others.with_columns(pl.col("info").str.extract_groups(_INFO)).unnest("info")
    others = others.filter(pl.col("reset").is_not_null() | pl.col("launch")
                           | pl.col("label").is_not_null() | pl.col("resume").is_not_null())
    events = pl.concat([dicts.with_columns(ev=pl.lit("dict")),
                        others.with_columns(ev=pl.lit("other")),
                        *([history] if history.height else [])], how="diagonal_relaxed")
    blank = frame.filter(text.is_null() | (text.str.strip_chars() == "")).select("line")
    args = frame.filter(text.str.contains("_steps", literal=True)).select(
        "line", arg=text.str.extract_groups(_ARG)).unnest("arg").drop_nulls()
    return {"events": events.sort("line", "off"), "pairs": pairs, "marks": marks,
            "blank": blank, "args": args}


#: Lines the scanner leaves to ``_parse``: those holding the literal of another event.
_GUARDS = ("| 0/", " = ", LAUNCH, "global step")
#: Prefix of the value columns of the scanner's dict rows.
_VALUE = "v:"
#: The scanner's dict values of a log it read none of.
_NO_VALUES = pl.DataFrame(schema={"line": pl.Int64, "off": pl.Int64})


def _dict_layout(data: bytes) -> Layout | None:
    """The layout of the chunk's first line of progress bars ending in one Trainer dict
    (:func:`_dict_line_layout`)."""
    return _layout.first(data, b"{'", _dict_line_layout)


def _dict_line_layout(sample: str) -> Layout | None:
    """The layout of a line of progress bars ending in one Trainer dict: the first bar's
    count and total, the dict's offset on the line and its values (one column per key, in
    the printed order); the bar redraws between them are skipped. None for another line."""
    if sample.count("{'") != 1 or not sample.rstrip().endswith("}") or "\r" not in sample \
            or any(guard in sample for guard in _GUARDS):
        return None  # a line pasted without its \r is the polars parser's (its bar is its own)
    before, entries = sample.split("{'", 1)
    bar = re.search(r"(\d+)/(\d+) \[", before)
    opening = before.find("|", 0, bar.start()) if bar else -1
    if bar is None or opening < 0 or not before[:bar.start()].endswith("| ") \
            or before.find("| ", opening + 1) != bar.start() - 2:
        return None
    keys = keys_of("{'" + entries)
    head, values = _layout.pieces(before[:opening + 1]), _layout.pieces("{'" + entries)
    if not keys or [kind for kind, _ in values if kind in _layout.SLOTS] != ["num"] * len(keys):
        return None  # a value that is not a number, or a number in a key
    program: list[Piece] = [("not", guard) for guard in _GUARDS]
    program += [*head, ("skipto", "| "), ("int", bar[1]), ("lit", "/"), ("int", bar[2]),
                ("lit", " ["), ("skipto", "it/s" if "it/s" in before else "s/it"), ("upto", "{'"),
                ("apart", "[=(,"), ("pos", ""), *values]  # as _parse's has_dict
    columns = [None] * sum(kind in _layout.SLOTS for kind, _ in head) \
        + ["n", "total", "off"] + [_VALUE + key for key in keys]
    return _layout.checked(sample, program, columns, _wide)


def _wide(frame: pl.DataFrame) -> pl.DataFrame:
    """What ``_parse`` reads of a line with one dict, as one row of the scanner's columns
    (no row when the line holds no readable dict, or several)."""
    tables = _parse(frame)
    dicts = tables["events"].filter(ev="dict")
    if dicts.height != 1 or tables["events"].height != 1:  # a bad one: layout.checked refuses
        return frame.clear()
    values = tables["pairs"].select(key=_VALUE + pl.col("key"), value="value")
    return pl.concat([
        dicts.select("line", "off", "bar_before", "snippet", "bad", "kind"),
        tables["marks"].select("n", "total"),
        pl.DataFrame({key: [value] for key, value in values.iter_rows()})], how="horizontal")


def _merge(parsed: Parsed, scanned: list[pl.DataFrame]) -> Parsed:
    """The scanner's dict rows (a frame per layout) into the events and marks of the other
    lines, in line order; their values stay one column per key (``values``: ``line``, ``off``
    and ``v:<key>`` columns), the other lines' in ``pairs``."""
    assert isinstance(parsed, dict)
    events, marks, values = [parsed["events"]], [parsed["marks"]], []
    for rows in scanned:
        keys = [c for c in rows.columns if c.startswith(_VALUE)]
        own = {key: pl.col(_VALUE + key) if _VALUE + key in keys else pl.lit(None, pl.Float64)
               for key in ("epoch", "step")}
        events.append(rows.select("line", "off", "bar_before", "snippet", "bad",
                                  epoch=own["epoch"], own_step=own["step"], kind="kind",
                                  ev=pl.lit("dict")))
        marks.append(rows.select("line", has_dict=pl.lit(True), n="n", total="total",
                                 pasted=pl.lit(False)))
        values.append(rows.select("line", "off", *keys))
    return {"events": in_order(events, "line", "off"), "pairs": parsed["pairs"],
            "blank": parsed["blank"], "args": parsed["args"],
            "values": in_order(values, "line"), "marks": in_order(marks, "line")}


def _with_bars(events: pl.DataFrame, marks: pl.DataFrame, blank: np.ndarray) -> pl.DataFrame:
    """``events`` (in pos order) with the count and total of the bar that tqdm redrew first on
    the line after each dict (past blank lines only, at the sorted ``blank`` positions: text
    pasted with a blank line after every line), and ``glued``: a dict with no bar before it on
    its line right after a line with a dict (stdout came in blocks)."""
    after = _on_line(events.select(pos=_next_line(events.get_column("pos"), blank)), marks)
    if marks.get_column("pasted").any():  # the bar on the dict's own line where it was pasted
        here = _on_line(events.select("pos"), marks)
        own = here.get_column("pasted").fill_null(False)
        after = after.with_columns(n=pl.when(own).then(here.get_column("n")).otherwise("n"),
                                   total=pl.when(own).then(here.get_column("total"))
                                   .otherwise("total"))
    is_dict = pl.col("ev") == "dict"
    events = events.with_columns(n=pl.when(is_dict).then(after.get_column("n")),
                                 total=pl.when(is_dict).then(after.get_column("total")))
    barless = is_dict & ~pl.col("bar_before").fill_null(True)
    if not events.select(barless.any()).item():  # every dict came after a bar
        return events.with_columns(glued=pl.lit(False))
    before = _on_line(events.select(pos=pl.col("pos") - 1), marks)
    return events.with_columns(glued=barless & before.get_column("has_dict").fill_null(False))


def _next_line(pos: pl.Series, blank: np.ndarray) -> pl.Series:
    """The line after each of ``pos`` that is not blank (``blank``: the sorted positions of
    the blank lines).

    >>> _next_line(pl.Series([3, 7]), np.array([4, 5, 9])).to_list()
    [6, 8]
    """
    if not blank.size:
        after: pl.Series = pos + 1
        return after
    at = pos.to_numpy() + 1
    for _ in range(4):  # a run of at most a few blank lines: a paste's, not a gap in the log
        hit = np.searchsorted(blank, at)
        inside = (hit < blank.size) & (blank[np.minimum(hit, blank.size - 1)] == at)
        if not inside.any():
            break
        at = at + inside
    return pl.Series(at, dtype=pl.Int64)


def _on_line(lines: pl.DataFrame, rows: pl.DataFrame) -> pl.DataFrame:
    """For each ``pos`` of ``lines``, the row of ``rows`` at that pos (nulls where none), both in
    pos order (a sorted merge, not a search per line); ``rows`` has one row per pos asked
    for."""
    found = lines.set_sorted("pos").join_asof(
        rows.with_columns(at="pos").set_sorted("pos"), on="pos", strategy="backward")
    hit = pl.col("at") == pl.col("pos")
    return found.select(pl.when(hit).then(pl.col(c)).alias(c) for c in rows.columns
                        if c != "pos")


def _printed_args(args: pl.DataFrame) -> dict[str, tuple[int, str]]:
    """logging_steps / eval_steps -> (value, where) as the log last prints them."""
    out: dict[str, tuple[int, str]] = {}
    for line, key, value in args.select("line", "key", "value").iter_rows():
        number = int(value) if value.isdigit() and len(value) < 12 else 0
        if number > 0:
            out[key] = (number, f"{key}={value} printed at line {line}")
    return out


def _assemble(path: Path, logs: list[Path], events: pl.DataFrame, marks: pl.DataFrame,
              pairs: pl.DataFrame, values: pl.DataFrame, findings: list[Finding],
              hints: dict[str, Any], printed: dict[str, tuple[int, str]]) -> RawLog:
    bad = events.filter(pl.col("bad").fill_null(False)).select("line", text="snippet")
    dicts = events.filter(pl.col("ev").eq("dict") & ~pl.col("bad"))
    if dicts.is_empty():
        raise InputError(f"{path}: no Trainer log dict could be read (expected lines like "
                         "{'loss': '2.346', 'learning_rate': '4.9e-05', 'epoch': '0.01'})")
    events = events.filter(pl.col("ev").ne("dict") | ~pl.col("bad"))
    events = events.with_columns(_legs(events))
    info, labels = _info(events)
    steps, step_findings = _hf_stdout_steps.steps(events, info, hints, logs[0], printed)
    findings += step_findings
    findings += _hf_stdout_steps.epoch_check(steps, info, logs[0])
    # a dict's own 'step' key is its step, not a metric
    pairs = pairs.filter(pl.col("key") != "step")
    values = values.drop(_VALUE + "step", strict=False)
    names = _names(pairs, values)
    scalars = pl.concat([_points(pairs, steps, names), _value_points(values, steps, names)])
    finding = unparsed_finding(logs[0] if len(logs) == 1 else path, bad,
                                      "Trainer log dicts")
    findings += [finding] if finding else []
    aliases = {name: key for key, name in names.items()}
    return RawLog(path=path, scalars=scalars, step_unit="optimizer",
                  facts={**{key: Fact(value, f"{logs[-1].name}: {where}", "logged")
                            for key, (value, where) in printed.items()},
                         **_facts(info, labels, steps, marks, pairs, values, logs)},
                  findings=findings,
                  files=logs,
                  aliases=aliases, leg_starts=_leg_starts(events))


def _names(pairs: pl.DataFrame, values: pl.DataFrame) -> dict[str, str]:
    keys = set(pairs.get_column("key").unique().drop_nulls())
    keys |= {c[len(_VALUE):] for c in values.columns if c.startswith(_VALUE)}
    return canonical_names(sorted(keys))


def _value_points(values: pl.DataFrame, steps: pl.DataFrame,
                  names: dict[str, str]) -> pl.DataFrame:
    """:data:`RAW_SCHEMA` rows of the scanner's dicts that have a step: a scanned line holds
    one dict, so its line finds its step (both frames in pos order)."""
    keys = [c for c in values.columns if c.startswith(_VALUE)]
    if not keys or steps.is_empty():
        return pl.DataFrame(schema=RAW_SCHEMA)
    found = _on_line(values.select("pos"), steps.select("pos", "step", "leg"))
    frame = pl.concat([values, found], how="horizontal").with_columns(
        wall_time=pl.lit(None, pl.Float64))
    if found.get_column("step").null_count():
        frame = frame.filter(pl.col("step").is_not_null())
    return to_raw(frame, {key: names[key[len(_VALUE):]] for key in keys})


def _points(pairs: pl.DataFrame, steps: pl.DataFrame, names: dict[str, str]) -> pl.DataFrame:
    """:data:`RAW_SCHEMA` rows of the entries whose dict has a step.

    Both frames are in (pos, off) order and a dict's entries are consecutive, so the dicts
    are matched once each by a sorted search on one integer key (the rank of the dict's line
    among the stepped dicts' lines, then its offset) and their step handed to their entries,
    instead of a hash join of every entry on two columns; the metric name comes from the
    key's code in an Enum.
    """
    if steps.is_empty() or pairs.is_empty():
        return _points_by_join(pairs, steps, names)
    pos, off = (pairs.get_column(c).to_numpy() for c in ("pos", "off"))
    dict_pos, dict_off = (steps.get_column(c).to_numpy() for c in ("pos", "off"))
    starts = np.flatnonzero(np.r_[True, (pos[1:] != pos[:-1]) | (off[1:] != off[:-1])])
    lines = dict_pos[np.r_[True, dict_pos[1:] != dict_pos[:-1]]]
    if max(off.max(), dict_off.max()) >= 1 << 32 or (np.diff(lines) <= 0).any():
        return _points_by_join(pairs, steps, names)  # out of order, or 4 GiB into a line
    rank = np.searchsorted(lines, pos[starts])
    on_line = lines[np.minimum(rank, len(lines) - 1)] == pos[starts]
    key = (rank.astype(np.int64) << 32) | off[starts]
    dict_key = (np.arange(len(lines), dtype=np.int64).repeat(
        np.diff(np.r_[np.flatnonzero(np.r_[True, dict_pos[1:] != dict_pos[:-1]]),
                      len(dict_pos)])) << 32) | dict_off
    if (np.diff(dict_key) <= 0).any():
        return _points_by_join(pairs, steps, names)
    at = np.minimum(np.searchsorted(dict_key, key), len(dict_key) - 1)
    found = on_line & (dict_key[at] == key)
    sizes = np.diff(np.r_[starts, len(pos)])
    entry_found, entry_at = found.repeat(sizes), at.repeat(sizes)
    kept = pairs if entry_found.all() else pairs.filter(pl.Series(entry_found))
    at = entry_at[entry_found]
    codes = kept.get_column("key").cast(pl.Enum(list(names))).to_physical()
    return kept.select(
        metric=pl.Series(list(names.values()), dtype=pl.String).gather(codes),
        value="value", step=steps.get_column("step").gather(at),
        wall_time=pl.lit(None, pl.Float64), leg=steps.get_column("leg").gather(at).cast(pl.Int32))


def _points_by_join(pairs: pl.DataFrame, steps: pl.DataFrame,
                    names: dict[str, str]) -> pl.DataFrame:
    return pairs.join(steps.select("pos", "off", "step", "leg"), on=["pos", "off"]).select(
        metric=pl.col("key").replace_strict(names, return_dtype=pl.String),
        value="value", step="step", wall_time=pl.lit(None, pl.Float64),
        leg=pl.col("leg").cast(pl.Int32))


def _legs(events: pl.DataFrame) -> pl.Series:
    """Leg of each event: a new leg at each INFO launch block, or, when the log has none, where
    the training bar starts again at 0 after train logs."""
    if events.get_column("launch").fill_null(False).any():
        launch = pl.col("launch").fill_null(False)
    else:
        totals = events.filter(kind="train").get_column("total").drop_nulls().unique()
        trains = (pl.col("kind").eq("train") & pl.col("ev").eq("dict")).fill_null(False) \
            .cast(pl.Int32).cum_sum()
        zero = pl.col("reset").is_in(totals.implode()).fill_null(False)
        launch = zero & (trains > pl.when(zero).then(trains).forward_fill().shift(1).fill_null(0))
    rows = events.select(launch=launch, stepped=pl.lit(False), step=pl.lit(0),
                         dicts=pl.col("ev") == "dict")
    return number_legs(rows, launch="launch", stepped="stepped", points="dicts")


def _info(events: pl.DataFrame) -> tuple[dict[str, Any], dict[str, str]]:
    """Fact name -> value from the INFO blocks, and -> the label printed: in each leg the first
    line of a label (an evaluation block later prints its own "Num examples"); the last leg's
    value wins."""
    rows = events.filter(pl.col("label").is_not_null() & pl.col("amount").is_not_null())
    rows = rows.group_by("leg", "label", maintain_order=True).first().sort("leg")
    pairs = rows.select("label", "amount").rows()
    return ({INFO[label]: int(amount.replace(",", "")) for label, amount in pairs},
            {INFO[label]: label for label, _ in pairs})


def _leg_starts(events: pl.DataFrame) -> dict[int, int]:
    resume = events.filter(pl.col("resume").is_not_null()).group_by("leg").agg(
        pl.col("resume").last())
    return {leg: step + 1 for leg, step in resume.iter_rows() if leg > 0}


def _facts(info: dict[str, Any], labels: dict[str, str], per: pl.DataFrame,
           marks: pl.DataFrame, pairs: pl.DataFrame, values: pl.DataFrame,
           logs: list[Path]) -> dict[str, Fact[Any]]:
    """The INFO block's numbers, the last step (of the dicts, or further on the training bar
    over Total optimization steps), and the summary's rates (for inference)."""
    where = logs[-1].name
    facts: dict[str, Fact[Any]] = {name: Fact(value, f"{where}: {labels[name]}", "logged")
                                   for name, value in info.items() if value}
    last = int(per.get_column("step").max())  # type: ignore[arg-type]
    facts["global_step"] = Fact(last, f"{where}: last step of the Trainer's log dicts")
    total = info.get("max_steps")
    if not total:  # no INFO block: the training bar's total, as the train logs saw it
        seen = per.filter(kind="train").get_column("total").drop_nulls()
        total = int(seen.mode().min()) if seen.len() else None  # type: ignore[arg-type]
        if total:
            facts["max_steps"] = Fact(total, f"{where}: total of the training bar")
    bar = marks.filter(pl.col("total") == total).get_column("n").max() if total else None
    if isinstance(bar, int) and bar > last:
        facts["global_step"] = Fact(bar, f"{where}: last count of the training bar ({bar}/"
                                    f"{total})")
    summary = per.filter(kind="summary").tail(1)
    if summary.height and "global_batch" not in facts:
        rates = pairs.join(summary.select("pos", "off"), on=["pos", "off"]).filter(
            pl.col("key").is_in(list(_RATES))).select("key", "value").rows()
        scanned = values.join(summary.select("pos", "off"), on=["pos", "off"])
        rates += [(key, scanned.get_column(_VALUE + key)[0]) for key in _RATES
                  if scanned.height and _VALUE + key in scanned.columns
                  and scanned.get_column(_VALUE + key)[0] is not None]
        for key, value in rates:
            facts[key] = Fact(value, f"{where}: summary dict at step {summary['step'][0]}: {key}")
    return facts


FORMAT = Format(
    "hf-stdout",
    "HF Trainer stdout: the dicts the Trainer prints ({'loss': ...}) and its progress bars, in a "
    ".log/.out/.txt/.err file",
    read=read, claims=claims, printed=True)
