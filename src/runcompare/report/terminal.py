"""The terminal summary: rich tables that fit the console's width; no colour when not a TTY.
Every name and message from a log goes through :func:`~runcompare.display.terminal_text`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Literal

import polars as pl
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from ..analysis import Comparison
from ..analysis.differs import Differences
from ..analysis.kinds import QUALITY
from ..display import fmt, listing, setting, terminal_text
from ..model import Fact, Run
from .plan_table import print_findings as _findings
from .plan_table import print_plan

__all__ = ["SWEEP_ROWS", "differs_table", "levels", "fmt", "hparams_table", "overview_table", "print_comparison",
           "print_plan", "print_run", "print_runs"]

#: Characters of a hyperparameter's value a table cell shows (``inspect`` shows all of it).
_CELL = 40
#: Characters of a column header a sweep's table keeps on one line (longer ones fold).
_HEADER = 12
#: Up to this many runs the "what differs" table has runs across; past it, runs down.
_ACROSS = 4

#: Rows of the batch-hierarchy table: label and how to get the fact of a run.
_LEVELS: tuple[tuple[str, Callable[[Run], Fact[Any]]], ...] = (
    ("micro-batch", lambda r: r.batch.per_device_batch),
    ("grad accumulation", lambda r: r.batch.grad_accum),
    ("per-device batch", lambda r: _derived(r.batch.per_device_step,
                                            "derived: micro-batch × grad_accum")),
    ("world size", lambda r: r.batch.world_size),
    ("global batch", lambda r: r.batch.global_batch),
    ("sequence length", lambda r: r.batch.seq_len),
    ("tokens / step", lambda r: r.batch.tokens_per_step),
    ("optimizer steps", lambda r: Fact(r.optimizer_steps, "last logged step")),
    ("micro-steps", lambda r: _derived(r.micro_steps, "derived: optimizer steps × grad_accum")),
    ("samples", lambda r: _total(r, "samples")),
    ("tokens", lambda r: _total(r, "tokens")),
)


def _updates(run: Run) -> Fact[int]:
    """Optimizer updates applied: the steps less those skipped on an fp16 overflow (which
    consumed their batch and made no update), where a log counted them."""
    skipped = run.facts.get("skipped_iterations")
    if skipped is None or skipped.value is None:
        return Fact(run.optimizer_steps, "every logged step made an update")
    return Fact(run.optimizer_steps - int(skipped.value),
                f"derived: optimizer steps − {int(skipped.value):,} skipped ({skipped.source})",
                "inferred")


def levels(runs: Sequence[Run]) -> tuple[tuple[str, Callable[[Run], Fact[Any]]], ...]:
    """The hierarchy's rows for ``runs``: :data:`_LEVELS`, with "updates applied" after the
    optimizer steps when a run skipped steps (Megatron's fp16 overflows)."""
    if not any(run.facts.get("skipped_iterations") for run in runs):
        return _LEVELS
    at = [label for label, _ in _LEVELS].index("optimizer steps") + 1
    return (*_LEVELS[:at], ("updates applied", _updates), *_LEVELS[at:])


#: Column headers of the hierarchy when runs are rows (past :data:`_ACROSS` runs); None: a
#: level left out there (per-device batch and micro-steps are products of the others).
_SHORT = ("micro", "accum", None, "world", "global", "seq len", "tokens/step", "steps", None,
          "samples", "tokens")


def _derived(value: int | None, source: str) -> Fact[int]:
    return Fact(value, source, "inferred") if value is not None else Fact(None, "not found")


def _total(run: Run, axis: str) -> Fact[int]:
    source = run.axis_sources.get(axis, "not found")
    kind: Literal["logged", "inferred"] = "logged" if source.startswith("logged") else "inferred"
    return Fact(run.total(axis), source.replace("schedule", "derived"), kind)


def origin(fact: Fact[Any]) -> str:
    """A one-word origin of a fact for narrow tables: set, config, logged, derived, inferred.

    >>> origin(Fact(2, "derived: global_batch ÷ (per_device_batch × grad_accum)", "inferred"))
    'derived'
    """
    if fact.value is None:
        return ""
    if fact.kind == "user":
        return "set"
    if fact.kind == "inferred":
        return "derived" if fact.source.startswith("derived") else "inferred"
    return fact.kind


def _cell(fact: Fact[int]) -> Text:
    text = Text(fmt(fact.value))
    if origin(fact):
        text.append(f" {origin(fact)}", style="dim")
    return text


def batch_table(runs: Sequence[Run], *, width: int = 100) -> Table:
    """Levels down, runs across, each number tagged with its origin (inspect shows sources);
    past :data:`_ACROSS` runs, runs down and as many levels across as fit in ``width``."""
    if len(runs) > _ACROSS:
        return _batch_rows(runs, width)
    table = Table(title="Batch hierarchy", title_justify="left")
    table.add_column("level", no_wrap=True)
    for run in runs:
        table.add_column(terminal_text(run.name), justify="right", overflow="fold")
    for label, get in levels(runs):
        table.add_row(label, *(_cell(get(run)) for run in runs))
    return table


def _batch_rows(runs: Sequence[Run], width: int) -> Table:
    """The hierarchy of a sweep: one row per run, numbers only (``inspect`` has sources)."""
    names = [run.name for run in runs]
    columns = {label: [fmt(get(run).value) for run in runs]
               for label, (_, get) in zip(_SHORT, _LEVELS) if label is not None}
    table = Table(title=f"Batch hierarchy ({len(runs)} runs)", title_justify="left")
    rest = _runs_down(table, names, list(columns.items()), width)
    table.caption = terminal_text(
        (f"not shown at this width: {', '.join(rest)}; " if rest else "")
        + "per-device batch = micro × accum; `runcompare inspect RUN` has every level with "
        "its source")
    table.caption_justify = "left"
    return table


def sources_table(run: Run) -> Table:
    """One run's hierarchy with the full source of every number."""
    table = Table(title="Batch hierarchy", title_justify="left")
    table.add_column("level", no_wrap=True)
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("source", style="dim", overflow="fold")
    for label, get in levels([run]):
        fact = get(run)
        table.add_row(label, fmt(fact.value), terminal_text(fact.source))
    return table


def print_run(run: Run, console: Console) -> None:
    """What ``runcompare inspect`` shows: sources, the hierarchy with sources, metrics."""
    console.print(Text(terminal_text(f"{run.name}  ({run.path})"), style="bold"))
    console.print(f"format {run.format}; sources {', '.join(run.sources)}; "
                  f"step unit {run.step_unit}; {run.scalars.height:,} points")
    console.print(sources_table(run))
    if run.hparams:
        console.print(hparams_table(run))
    console.print(terminal_text(f"metrics: {', '.join(run.metrics)}"))
    _findings(console, run.findings)


def print_runs(runs: Sequence[Run], differs: Differences, console: Console) -> None:
    """What ``runcompare inspect`` shows for a folder of several runs: each run in full (see
    :func:`print_run`) up to :data:`_ACROSS` runs; past that an overview a screen can hold:
    a row per run (what was read, and how many warnings), the hierarchy and what differs
    (``differs``, :func:`~runcompare.analysis.differs.differences` of the runs) with runs as
    rows, and the findings grouped by code."""
    if len(runs) <= _ACROSS:
        for run in runs:
            print_run(run, console)
        return
    _print_table(console, overview_table(runs, width=console.width))
    _print_table(console, batch_table(runs, width=console.width))
    table = differs_table(runs, differs, width=console.width)
    if table is not None:
        _print_table(console, table)
    # each once: the warning that a run was skipped is in every run's findings
    _findings(console, list(dict.fromkeys(f for run in runs for f in run.findings)),
              grouped=True)
    console.print(Text("`runcompare inspect RUN` shows one run in full (every number's source, "
                       "every hyperparameter, every finding); -v shows every run in full here "
                       "and --json has them all", style="dim"))


def overview_table(runs: Sequence[Run], *, width: int = 100) -> Table:
    """A sweep's runs as rows: format, step unit, points, metrics and warnings (findings of
    warning or error level) of each, as many columns as fit in ``width``."""
    table = Table(title=f"{len(runs)} runs", title_justify="left")
    columns = [
        ("format", [terminal_text(run.format) for run in runs]),
        ("step unit", [terminal_text(run.step_unit) for run in runs]),
        ("points", [fmt(run.scalars.height) for run in runs]),
        ("metrics", [fmt(len(run.metrics)) for run in runs]),
        ("warnings", [fmt(sum(f.level != "info" for f in run.findings)) for run in runs]),
        ("sources", [terminal_text(", ".join(run.sources)) for run in runs]),
    ]
    rest = _runs_down(table, [run.name for run in runs], columns, width, justify="left")
    if rest:
        table.caption = f"not shown at this width: {', '.join(rest)}"
        table.caption_justify = "left"
    return table


def hparams_table(run: Run) -> Table:
    """Every hyperparameter of one run: key, value in full, and the source that holds it."""
    table = Table(title=f"Hyperparameters ({len(run.hparams)})", title_justify="left")
    table.add_column("key", overflow="fold")
    table.add_column("value", overflow="fold")
    table.add_column("from", style="dim", overflow="fold")
    for key, fact in sorted(run.hparams.items()):
        where = fact.source[:-len(key) - 2] if fact.source.endswith(f": {key}") else fact.source
        table.add_row(terminal_text(key), terminal_text(setting(fact.value)), terminal_text(where))
    return table


def _short(value: object) -> str:
    text = terminal_text(setting(value))
    return text if len(text) <= _CELL else text[:_CELL - 1] + "…"


def differs_table(runs: Sequence[Run], differs: Differences, *,
                  width: int = 100) -> Table | None:
    """The hyperparameters that differ between ``runs`` (``differs``): keys down and runs
    across for up to :data:`_ACROSS` runs; past that runs down and as many keys across as fit
    in ``width``, the batch keys (in the hierarchy already) last, the caption naming the
    rest. None when nothing differs."""
    if not differs:
        return None
    names = [run.name for run in runs]
    table = Table(title=f"What differs ({len(differs.keys)} hyperparameters)",
                  title_justify="left")
    notes = [differs_note(differs)]
    if len(names) <= _ACROSS:
        table.add_column("key", overflow="fold")
        for name in names:
            table.add_column(terminal_text(name), overflow="fold")
        for d in differs.keys:
            table.add_row(terminal_text(d.key), *(_value(d.facts[n]) for n in names))
    else:
        cells = {d.key: [_value(d.facts[n]) for n in names] for d in differs.keys}
        order = [d.key for d in differs.settings()] + [k for k in cells if k not in
                                                        {d.key for d in differs.settings()}]
        rest = _runs_down(table, names, [(key, cells[key]) for key in order], width,
                          justify="left")
        if rest:
            notes.insert(0, f"{len(rest)} more keys than fit at this width "
                            f"({listing(rest, limit=3)}): the report and --json have them all")
    table.caption = terminal_text("; ".join(notes))
    table.caption_justify = "left"
    return table


def _value(fact: Fact[object] | None) -> str:
    return _short(None if fact is None else fact.value)


def _runs_down(table: Table, names: Sequence[str],
               columns: Sequence[tuple[str, Sequence[str]]], width: int, *,
               justify: JustifyMethod = "right") -> list[str]:
    """``table`` (a sweep's: past :data:`_ACROSS` runs) with a row per run of ``names`` and as
    many of ``columns`` (header, a cell per run) across as fit in ``width``; the headers of
    the columns that do not fit, for the caption to name."""
    shown = _fitting([_widest(names)], columns, width)
    cells = dict(columns)
    table.add_column("run", overflow="fold")
    for header in shown:
        table.add_column(terminal_text(header), justify=justify, overflow="fold")
    for i, name in enumerate(names):
        table.add_row(terminal_text(name), *(cells[header][i] for header in shown))
    return [header for header, _ in columns if header not in shown]


def _widest(texts: Sequence[str], cap: int = 30) -> int:
    return min(max((len(t) for t in texts), default=1), cap)


def _fitting(fixed: Sequence[int], columns: Sequence[tuple[str, Sequence[str]]],
             width: int) -> list[str]:
    """The names of the first ``columns`` (name, cells) that fit beside the ``fixed`` column
    widths in ``width`` characters (each column's border and padding counted); at least one.

    A header longer than :data:`_HEADER` folds onto several lines.

    >>> _fitting([10], [("a", ["1"]), ("b" * 20, ["2"]), ("c", ["3"])], 33)
    ['a', 'bbbbbbbbbbbbbbbbbbbb']
    """
    used = 1 + sum(w + 3 for w in fixed)
    shown: list[str] = []
    for name, cells in columns:
        need = max(min(len(name), _HEADER), _widest(list(cells), cap=_CELL)) + 3
        if shown and used + need > width:
            break
        shown.append(name)
        used += need
    return shown


def differs_note(differs: Differences) -> str:
    """What the "what differs" table leaves out, in one sentence (terminal and report)."""
    notes = []
    if differs.identity:
        notes.append(f"names and paths also differ ({listing(differs.identity)})")
    if differs.partial:
        notes.append(f"{len(differs.partial)} keys only some runs' logs hold, with one value "
                     f"({listing(differs.partial, limit=3)})")
    if any(not d.everywhere for d in differs.keys):
        notes.append("— : no such key in that run's logs")
    return "; ".join([*notes, "`runcompare inspect RUN` lists every value with its source"])


def print_comparison(comparison: Comparison, console: Console,
                     report: str | None = None, *, every: bool = False) -> None:
    """The compare summary: the headline and the key numbers first, then the batch hierarchy,
    a race table per quality metric, the diagnostics, the end-of-run totals, throughput, the
    verdict in full and the findings. Past :data:`SWEEP_ROWS` runs the tables hold the best
    :data:`SWEEP_ROWS` at the budget unless ``every`` (``-v``)."""
    glance(comparison, console)
    whole = comparison
    comparison = comparison if every else _best(comparison)
    if comparison is not whole:
        console.print(terminal_text(f"The tables show the best {len(comparison.runs)} of "
                                    f"{len(whole.runs)} runs at the budget; -v, the report and "
                                    "--json have every run."), style="dim")
    _print_table(console, batch_table(comparison.runs, width=console.width))
    differs = differs_table(comparison.runs, comparison.differs, width=console.width)
    if differs is not None:
        _print_table(console, differs)
    for metric in comparison.metrics:
        if comparison.kinds.get(metric) == QUALITY:
            console.print(summary_table(comparison, metric))
    diagnostics = diagnostics_table(comparison, width=console.width)
    if diagnostics is not None:
        _print_table(console, diagnostics)
    totals = totals_table(comparison, width=console.width)
    if totals is not None:
        _print_table(console, totals)
    console.print(throughput_table(comparison))
    if comparison.x != comparison.proposed_axis:
        console.print(f"fair axis for these runs: {comparison.proposed_axis} "
                      f"(compared on {comparison.x})")
    for name, members in comparison.groups.items():
        console.print(terminal_text(f"seed group {name}: {', '.join(members)}"))
    console.print(Text("The verdict in full", style="bold"))
    console.print(terminal_text(str(whole)))
    comparison = whole
    # a run's own info findings (sources merged, points a restart overrode) are for `inspect`
    _findings(console, [f for f in comparison.finding_list
                        if f.level != "info" or f.run is None],
              grouped=len(comparison.runs) > _ACROSS)
    if report:
        console.print(terminal_text(f"report: {report}"))


#: Runs a terminal table holds in a sweep (``-v``: all of them).
SWEEP_ROWS = 10


def _best(comparison: Comparison) -> Comparison:
    """The comparison's tables cut to its best :data:`SWEEP_ROWS` runs at the budget (then the
    first runs given, when fewer have a value); itself when it has no more runs than that."""
    if len(comparison.runs) <= SWEEP_ROWS:
        return comparison
    ranked = list(comparison.verdict.run_values) if comparison.verdict is not None else []
    names = (ranked + [r.name for r in comparison.runs if r.name not in ranked])[:SWEEP_ROWS]
    kept = set(names)
    order = {name: i for i, name in enumerate(names)}
    keep = pl.col("run").is_in(list(kept))
    return dataclasses.replace(
        comparison, runs=sorted((r for r in comparison.runs if r.name in kept),
                                key=lambda r: order[r.name]),
        summary=comparison.summary.filter(keep),
        totals=comparison.totals.filter(keep) if comparison.totals.height else comparison.totals,
        throughput=comparison.throughput.filter(keep))


def glance(comparison: Comparison, console: Console) -> None:
    """The headline (bold) and one line per key number: the first lines of ``compare``."""
    found = comparison.verdict
    if found is None:
        return
    console.print(Text(terminal_text(found.headline), style="bold"))
    for card in found.key_numbers:
        console.print(Text.assemble((terminal_text(f"{card['label']}: "), "dim"),
                                    (terminal_text(card["value"]), "bold"),
                                    terminal_text(f"  ({card['detail']})")))
    console.print()


def summary_table(comparison: Comparison, metric: str) -> Table:
    """One quality metric's race: final, best, value at the budget, the crossing of the
    target (interpolated; the title says on which curve) and the speedups."""
    rows = comparison.summary.filter(metric=metric)
    budget, target = rows.get_column("budget")[0], rows.get_column("target")[0]
    curve = rows.get_column("curve")[0]
    where = "raw values" if curve == "raw" else "local fit of the raw points"
    table = Table(title=terminal_text(f"{metric} on {comparison.x} (target crossed on the "
                                      f"{where})"), title_justify="left")
    for column in ("run", "final", "best", f"at {comparison.x} {fmt(budget)}",
                   f"{comparison.x} to {fmt(target)}", "speedup", "seconds to target",
                   "speedup (s)"):
        table.add_column(column, justify="left" if column == "run" else "right",
                         overflow="fold")  # a run's name whole, on several lines if need be
    for row in rows.iter_rows(named=True):
        table.add_row(terminal_text(row["run"]), *(fmt(row[k]) for k in (
            "final", "best", "at_common_budget", "x_to_target", "speedup",
            "elapsed_to_target", "elapsed_speedup")))
    return table


def diagnostics_table(comparison: Comparison, *, width: int = 100) -> Table | None:
    """Schedules and diagnostics (no races): the final value and the value at the budget of
    each metric and run; past :data:`_ACROSS` runs, runs down and the value at the budget of
    as many metrics across as fit in ``width`` (the caption names the rest)."""
    rows = comparison.summary.filter(kind="diagnostic")
    if rows.is_empty():
        return None
    table = Table(title=f"Schedules and diagnostics on {comparison.x} (not raced)",
                  title_justify="left")
    names = [run.name for run in comparison.runs]
    if len(names) <= _ACROSS:
        for column in ("metric", "run", "final", "at common budget"):
            table.add_column(column, justify="left" if column in ("metric", "run") else "right",
                             overflow="fold")
        for row in rows.iter_rows(named=True):
            table.add_row(terminal_text(row["metric"]), terminal_text(row["run"]),
                          fmt(row["final"]), fmt(row["at_common_budget"]))
        return table
    values = {(r, m): v for r, m, v in rows.select("run", "metric", "at_common_budget")
              .iter_rows()}
    metrics = rows.get_column("metric").unique(maintain_order=True).to_list()
    rest = _runs_down(table, names, [(m, [fmt(values.get((n, m))) for n in names])
                                     for m in metrics], width)
    more = (f"; {len(rest)} more metrics than fit at this width ({listing(rest, limit=3)})"
            if rest else "")
    table.caption = terminal_text(f"each at the common budget{more}: the report and --json "
                                  "have the final values too")
    table.caption_justify = "left"
    return table


def _print_table(console: Console, table: Table) -> None:
    """``table``, then its caption as a line of the console's width (a caption wraps at the
    table's, a narrow column of text under a narrow table)."""
    note, table.caption = table.caption, None
    console.print(table)
    if note:
        console.print(Text(str(note), style="dim"))


def totals_table(comparison: Comparison, *, width: int = 100) -> Table | None:
    """End-of-run values: metrics down and runs across; past :data:`_ACROSS` runs, runs down
    and as many metrics across as fit in ``width`` (the caption names the rest)."""
    totals = comparison.totals
    if totals.is_empty():
        return None
    table = Table(title="End-of-run totals", title_justify="left")
    names = [run.name for run in comparison.runs]
    metrics = totals.get_column("metric").unique(maintain_order=True).to_list()
    values = {(r, m): v for r, m, v in totals.select("run", "metric", "value").iter_rows()}
    if len(names) <= _ACROSS:
        table.add_column("metric", overflow="fold")
        for name in names:
            table.add_column(terminal_text(name), justify="right", overflow="fold")
        for metric in metrics:
            table.add_row(terminal_text(metric), *(fmt(values.get((n, metric))) for n in names))
        return table
    rest = _runs_down(table, names, [(m, [fmt(values.get((n, m))) for n in names])
                                     for m in metrics], width)
    if rest:
        table.caption = terminal_text(f"{len(rest)} more metrics than fit at this width "
                                      f"({listing(rest, limit=3)}): the report and --json have "
                                      "them all")
        table.caption_justify = "left"
    return table


def throughput_table(comparison: Comparison) -> Table:
    table = Table(title="Throughput", title_justify="left")
    columns = {"run": "run", "samples_per_s": "samples/s", "tokens_per_s": "tokens/s",
               "tokens_per_s_per_device": "tokens/s/device", "mfu": "MFU"}
    for label in columns.values():
        table.add_column(label, justify="left" if label == "run" else "right", overflow="fold")
    for row in comparison.throughput.iter_rows(named=True):
        table.add_row(terminal_text(row["run"]), *(fmt(row[k]) for k in list(columns)[1:]))
    return table
