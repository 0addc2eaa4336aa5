"""The report's tables: the batch hierarchy (each number's source in a popover, rows where
the runs differ marked), the sweep's leaderboard, findings (grouped by code in a sweep), the
races, diagnostics, end-of-run totals, throughput and the footer. Every string from a log
goes through :func:`e`; every wide table scrolls inside its own box."""

from __future__ import annotations

import html
import platform
import statistics
from collections.abc import Sequence
from typing import Any

from ..analysis import Comparison
from ..analysis.differs import Difference
from ..analysis.kinds import QUALITY
from ..analysis.summary import higher_is_better
from ..display import fmt, fmt_apart, setting
from ..model import Fact, Run
from .grouped import FindingGroup, group_findings
from .terminal import _LEVELS, differs_note, levels
from .verdict import where

__all__ = ["batch_table", "diagnostics", "differs", "e", "findings", "footer", "leaderboard",
           "summary", "throughput", "totals"]

#: Hierarchy rows the leaderboard shows per run (the run's settings, not its totals).
_SETTINGS = 7


def e(value: object) -> str:
    """``value`` as HTML text (quotes too, so it may stand in an attribute)."""
    return html.escape(str(value), quote=True)


#: Rows past which a table scrolls inside a box half the screen high (a sweep's 200 runs).
_TALL = 25


def boxed(table: str) -> str:
    """A table in a box that scrolls sideways when wide, and down when past :data:`_TALL`
    rows (every row is there; the page stays short)."""
    tall = " board" if table.count("<tr") > _TALL else ""
    return f'<div class="scroll{tall}">{table}</div>'


def _number(fact: Fact[Any]) -> str:
    """A fact's value as a button that opens its source (click or tap: no hover needed)."""
    if fact.value is None:
        return f'<td class="unknown">{e(fmt(None))}</td>'
    value = fmt(fact.value) if not isinstance(fact.value, str) else fact.value
    return (f'<td><button type="button" class="src" data-src="{e(fact.source)}">'
            f"{e(value)}</button></td>")


def _setting(fact: Fact[Any] | None) -> str:
    """A hyperparameter's value in full, as a button that opens its source."""
    if fact is None:
        return f'<td class="unknown">{e(setting(None))}</td>'
    return (f'<td><button type="button" class="src" data-src="{e(fact.source)}">'
            f"{e(setting(fact.value))}</button></td>")


def differs(comparison: Comparison) -> str:
    """The hyperparameters that differ between the runs: keys down, runs across (the
    leaderboard carries them for a sweep); nothing when none differ."""
    found = comparison.differs
    if not found:
        return ""
    names = [run.name for run in comparison.runs]
    head = "".join(f"<th>{e(name)}</th>" for name in names)
    rows = "".join(f"<tr><th>{e(d.key)}</th>{''.join(_setting(d.facts[n]) for n in names)}</tr>"
                   for d in found.keys)
    table = f"<table class=differs><tr><th></th>{head}</tr>{rows}</table>"
    return (f"<h2>What differs</h2>{boxed(table)}<p class=note>{len(found.keys)} "
            f"hyperparameters differ. Tap a value for its source; {e(differs_note(found))}.</p>")


def _differs(facts: Sequence[Fact[Any]]) -> bool:
    return len({repr(f.value) for f in facts}) > 1


def batch_table(runs: Sequence[Run]) -> str:
    """Levels down, runs across; rows where the runs differ are marked."""
    head = "".join(f"<th>{e(run.name)}</th>" for run in runs)
    rows = []
    for label, get in levels(runs):
        facts = [get(run) for run in runs]
        mark = len(runs) > 1 and _differs(facts)
        flag = ' <span class="tag">differs</span>' if mark else ""
        rows.append(f'<tr{" class=differ" if mark else ""}><th>{e(label)}{flag}</th>'
                    f"{''.join(_number(f) for f in facts)}</tr>")
    table = f"<table class=batch><tr><th></th>{head}</tr>{''.join(rows)}</table>"
    return (f"<h2>Batch hierarchy</h2>{boxed(table)}<p class=note>Tap or click a number for "
            "where it came from; <span class=tag>differs</span> marks a row where the runs "
            "differ.</p>")


def leaderboard(comparison: Comparison, top: Sequence[str], palette: Sequence[str]) -> str:
    """The runs ranked by the verdict's metric at the common budget, with the levels of the
    batch hierarchy and the settings that differ between runs (a column the same in every run
    is said once under the table, not repeated down it), values printed with the digits that
    tell them apart; then the metric by each differing setting's value (:func:`_by_setting`)."""
    verdict = comparison.verdict
    values = verdict.run_values if verdict is not None else {}
    runs = {run.name: run for run in comparison.runs}
    order = [n for n in values if n in runs] + [n for n in runs if n not in values]
    levels = [(label, get) for label, get in _LEVELS[:_SETTINGS]
              if len({get(run).value for run in runs.values()}) > 1]
    same = [label for label, get in _LEVELS[:_SETTINGS] if (label, get) not in levels]
    settings: list[Difference] = comparison.differs.settings()
    group = {name: g for g, names in comparison.groups.items() for name in names}
    metric = e(verdict.metric) if verdict is not None and verdict.metric else "metric"
    at = e(where(verdict.axis, verdict.budget)) if verdict and verdict.budget is not None else ""
    shown = dict(zip(values, fmt_apart(list(values.values()))))
    head = (f"<tr><th>#</th><th>run</th><th>{metric} <small>{at}</small></th>"
            + ("<th>seed group</th>" if group else "")
            + "".join(f"<th>{e(label)}</th>" for label, _ in levels)
            + "".join(f"<th>{e(d.key)}</th>" for d in settings) + "</tr>")
    rows = []
    for rank, name in enumerate(order, 1):
        run = runs[name]
        colour = palette[top.index(name) % len(palette)] if name in top else None
        swatch = (f'<span class="swatch" style="background:{colour}"></span>' if colour
                  else '<span class="swatch faint"></span>')
        value = shown[name] if name in values else "— (no value at the budget)"
        rows.append(
            f"<tr><td>{rank if name in values else ''}</td><th>{swatch}{e(name)}</th>"
            f"<td>{e(value)}</td>"
            + (f"<td>{e(group.get(name, ''))}</td>" if group else "")
            + "".join(_number(get(run)) for _, get in levels)
            + "".join(_setting(d.facts[name]) for d in settings)
            + "</tr>")
    first = runs[order[0]] if order else None
    alike = "; ".join(f"{label} {fmt(get(first).value)}" for label, get in _LEVELS[:_SETTINGS]
                      if label in same) if first is not None else ""
    return (f'<h2>Leaderboard</h2><div class="controls"><label>filter runs <input type="search" '
            f'id="rc-filter" placeholder="part of a run name"></label><span class="note" '
            f'id="rc-filter-count"></span><span class="note">tap a column to sort by it'
            f"</span></div><div class=\"scroll board\"><table class=board "
            f'id="rc-board">{head}{"".join(rows)}</table></div><p class=note>{len(order)} runs '
            f"ranked by {metric} {at} (the verdict's metric and budget; the local fit for "
            f"training metrics, the values as logged for evals). Columns: the levels of the "
            f"batch hierarchy and the hyperparameters that differ between runs"
            + (f"; the same in every run: {e(alike)}" if alike else "")
            + f". Tap a number for its source; {e(differs_note(comparison.differs))}.</p>"
            + _by_setting(comparison, values,
                          [(label, {n: get(r).value for n, r in runs.items()})
                           for label, get in levels]
                          + [(d.key, {n: None if f is None else f.value
                                      for n, f in d.facts.items()}) for d in settings],
                          metric, at))


#: A setting with at most this many values gets a row per value in the table by setting.
_VALUES = 12


def _by_setting(comparison: Comparison, values: dict[str, float],
                settings: Sequence[tuple[str, dict[str, Any]]], metric: str, at: str) -> str:
    """For each differing setting (a level of the hierarchy or a hyperparameter: its name and
    each run's value) with a few values: the runs at each value, the best and the median of
    the metric among them, best value first; a setting that splits the runs as one before it
    does (the global batch of a sweep of micro-batches) is left out."""
    if not values or comparison.verdict is None or comparison.verdict.metric is None:
        return ""
    higher = higher_is_better(comparison.verdict.metric)
    tables, seen = [], set()
    for key, held in settings:
        by: dict[str, list[float]] = {}
        members: dict[str, list[str]] = {}
        for name, value in values.items():
            by.setdefault(setting(held.get(name)), []).append(value)
            members.setdefault(setting(held.get(name)), []).append(name)
        split = frozenset(frozenset(names) for names in members.values())
        if not 1 < len(by) <= _VALUES or split in seen:
            continue  # one value, too many, or the same split of the runs as a key before
        seen.add(split)
        best = {key: (max(v) if higher else min(v)) for key, v in by.items()}
        keys = sorted(by, key=lambda k: -best[k] if higher else best[k])
        shown = fmt_apart([best[k] for k in keys])
        medians = fmt_apart([float(statistics.median(by[k])) for k in keys])
        rows = "".join(f"<tr><th>{e(k)}</th><td>{len(by[k])}</td><td>{e(b)}</td>"
                       f"<td>{e(m)}</td></tr>" for k, b, m in zip(keys, shown, medians))
        tables.append(f"<table class=bykey><tr><th>{e(key)}</th><th>runs</th>"
                      f"<th>best</th><th>median</th></tr>{rows}</table>")
    if not tables:
        return ""
    return (f"<h3>{metric} {at} by setting</h3><div class=\"scroll bykeys\">"
            f"{''.join(tables)}</div>")


def findings(comparison: Comparison, *, grouped: bool) -> str:
    """Every finding; in a sweep (``grouped``) one line per level and code, with how many
    runs it concerns and which."""
    items = comparison.finding_list
    if not items:
        return '<h2 id="findings">Findings</h2><p>None.</p>'
    if not grouped:
        lines = "".join(
            f'<li class="{e(f.level)}"><b>{e(f.level)}</b> <code>{e(f.code)}</code> '
            f"{e(f.run + ': ' if f.run else '')}{e(f.message)}</li>" for f in items)
        return f'<h2 id="findings">Findings</h2><ul class=findings>{lines}</ul>'
    groups = group_findings(items)
    lines = "".join(_grouped(group) for group in groups)
    return (f'<h2 id="findings">Findings</h2><ul class=findings>{lines}</ul>'
            f"<p class=note>{len(items):,} findings in {len(groups)} kinds; open a line for "
            f"the runs it concerns.</p>")


def _grouped(group: FindingGroup) -> str:
    messages = group.messages
    example = e(messages[0]) + (f" <small>(and {len(messages) - 1} other wordings)</small>"
                                if len(messages) > 1 else "")
    listed = ", ".join(e(name) for name in group.runs)
    body = (f"<details><summary>{example}</summary><p>{listed}</p></details>" if group.runs
            else example)
    return (f'<li class="{e(group.level)}"><b>{e(group.level)}</b> <code>{e(group.code)}</code> '
            f"× {len(group.members):,} ({group.concerns}): {body}</li>")


def throughput(comparison: Comparison) -> str:
    columns = {"samples_per_s": "samples/s", "tokens_per_s": "tokens/s",
               "tokens_per_s_per_device": "tokens/s per device", "mfu": "MFU"}
    head = "".join(f"<th>{label}</th>" for label in columns.values())
    rows = "".join(
        f"<tr><th>{e(r['run'])}</th>{''.join(f'<td>{fmt(r[c])}</td>' for c in columns)}</tr>"
        for r in comparison.throughput.iter_rows(named=True))
    return f"<h2>Throughput</h2>{boxed(f'<table><tr><th></th>{head}</tr>{rows}</table>')}"


def summary(comparison: Comparison) -> str:
    races = comparison.summary.filter(kind=QUALITY)
    if races.is_empty():
        return ""
    x = e(comparison.x)
    rows = "".join(
        f"<tr><td>{e(r['metric'])}</td><td>{e(r['run'])}</td><td>{fmt(r['final'])}</td>"
        f"<td>{fmt(r['best'])}</td><td>{fmt(r['at_common_budget'])} "
        f"<small>at {x} {fmt(r['budget'])}</small></td><td>{fmt(r['x_to_target'])} "
        f"<small>to {fmt(r['target'])}, {e(r['curve'] or '')}</small></td>"
        f"<td>{fmt(r['speedup'])}</td><td>{fmt(r['elapsed_to_target'])}</td>"
        f"<td>{fmt(r['elapsed_speedup'])}</td></tr>"
        for r in races.iter_rows(named=True))
    table = (f"<table class=summary><tr><th>metric</th><th>run</th>"
             f"<th>final</th><th>best</th><th>at common budget</th><th>{x} to target</th>"
             f"<th>speedup</th><th>seconds to target</th><th>speedup in seconds</th></tr>{rows}"
             f"</table>")
    return (f"<h2>Summary</h2>{boxed(table)}<p class=note>x to target is where the curve "
            f"crosses the target, interpolated between the two points around it and never "
            f"extrapolated: on the values as logged for eval metrics (raw), on the smoothed "
            f"curve for per-step training metrics (smoothed). Speedups are the first run's "
            f"crossing ÷ each run's.</p>")


def diagnostics(comparison: Comparison) -> str:
    rows = comparison.summary.filter(kind="diagnostic")
    if rows.is_empty():
        return ""
    body = "".join(
        f"<tr><td>{e(r['metric'])}</td><td>{e(r['run'])}</td><td>{fmt(r['final'])}</td>"
        f"<td>{fmt(r['at_common_budget'])}</td></tr>" for r in rows.iter_rows(named=True))
    table = ("<table class=summary><tr><th>metric</th><th>run</th><th>final</th>"
             f"<th>at common budget</th></tr>{body}</table>")
    return (f"<h2>Schedules and diagnostics</h2>{boxed(table)}"
            "<p class=note>Not raced: a target makes no sense for these.</p>")


def totals(comparison: Comparison) -> str:
    table = comparison.totals
    if table.is_empty():
        return ""
    names = [run.name for run in comparison.runs]
    head = "".join(f"<th>{e(name)}</th>" for name in names)
    rows = []
    for metric in table.get_column("metric").unique(maintain_order=True).to_list():
        values = dict(table.filter(metric=metric).select("run", "value").iter_rows())
        cells = "".join(f"<td>{fmt(values.get(name))}</td>" for name in names)
        rows.append(f"<tr><th>{e(metric)}</th>{cells}</tr>")
    body = f"<table><tr><th></th>{head}</tr>{''.join(rows)}</table>"
    return f"<h2>End-of-run totals</h2>{boxed(body)}"


def footer(runs: Sequence[Run]) -> str:
    from importlib.metadata import version

    from .._version import __version__

    versions = ", ".join(f"{name} {version(name)}" for name in ("polars", "plotly"))
    paths = "".join(f"<li>{e(run.name)}: <code>{e(run.path)}</code> ({e(run.format)})</li>"
                    for run in runs)
    return (f"<footer><p>runcompare {e(__version__)} · Python {platform.python_version()} · "
            f"{e(versions)}</p><details><summary>{len(runs)} input paths</summary>"
            f"<ul>{paths}</ul></details></footer>")
