"""Choosing what to compare: runs by name (``--runs REGEX``), metrics by glob
(``--metric 'train/*'``) and the best runs of a sweep (``--top N``).

``--runs`` keeps the runs whose name a pattern finds (:func:`re.search`; several patterns:
any of them). With ``--top N`` the runs are ranked by the verdict of all of them (its metric
at its common budget, :attr:`~.verdict.Verdict.run_values`) and the best N are compared, plus
every run a ``--runs`` pattern names: the baseline a sweep is held against. Which runs were
left out is an info finding, never silent.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import UnknownMetricError, UsageError
from ..model import Finding, Run

__all__ = ["choose", "expand_metrics", "is_glob", "select_runs"]

_GLOB = re.compile(r"[*?\[]")


def is_glob(metric: str, available: Iterable[str] = ()) -> bool:
    """Whether ``--metric`` was given a glob (``*``, ``?`` or ``[``) rather than a name: a
    metric of ``available`` named so (a name from a log may hold ``[``) is a name."""
    return _GLOB.search(metric) is not None and metric not in set(available)


def select_runs(runs: Sequence[Run], patterns: Sequence[str]) -> list[Run]:
    """The runs whose name any of ``patterns`` (regular expressions) finds, in their order.

    Raises :class:`UsageError` for a pattern that is not a regular expression or finds no run.

    >>> from types import SimpleNamespace as R
    >>> [r.name for r in select_runs([R(name="lr1e-3_s1"), R(name="lr3e-3_s1")], ["1e-3"])]
    ['lr1e-3_s1']
    """
    compiled = []
    for pattern in patterns:
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise UsageError(f"--runs {pattern!r} is not a regular expression ({exc}); "
                             "e.g. --runs 'lr1e-3_.*'") from exc
    names = [run.name for run in runs]
    for pattern, regex in zip(patterns, compiled):
        if not any(regex.search(name) for name in names):
            raise UsageError(f"--runs {pattern!r} matches no run name; the runs are "
                             f"{_listed(names)}")
    return [run for run in runs if any(regex.search(run.name) for regex in compiled)]


def expand_metrics(runs: Sequence[Run], metrics: Sequence[str]) -> list[str]:
    """``metrics`` with each glob (``train/*``, ``eval/?oss``, ``[te]*/loss``) replaced by the
    metrics any run logged that it matches, in name order; a plain name, or the name of a
    logged metric (which may hold ``[`` or ``*``), stays as it is.

    Raises :class:`UnknownMetricError` for a glob that matches no metric.

    >>> from types import SimpleNamespace as R
    >>> expand_metrics([R(metrics=["eval/loss", "train/grad_norm", "train/loss"])],
    ...                ["train/*", "eval/loss", "train/loss"])
    ['train/grad_norm', 'train/loss', 'eval/loss']
    """
    available = sorted({m for run in runs for m in run.metrics})
    out: list[str] = []
    for metric in metrics:
        if not is_glob(metric, available):
            out.append(metric)
            continue
        found = [m for m in available if fnmatch.fnmatchcase(m, metric)]
        if not found:
            raise UnknownMetricError(f"--metric {metric!r} matches no metric; available: "
                                     f"{', '.join(available)}")
        out += found
    return list(dict.fromkeys(out))


def choose(runs: Sequence[Run], *, patterns: Sequence[str] = (), top: int | None = None,
           **options: Any) -> Any:
    """The :class:`~.compare.Comparison` of the runs ``patterns`` and ``top`` choose (see the
    module docstring); ``options`` go to :func:`~.compare.compare`."""
    from .compare import compare, rank

    if top is None:
        return compare(select_runs(runs, patterns) if patterns else runs, **options)
    if top < 1:
        raise UsageError(f"--top {top}: give a number of runs ≥ 1")
    named = select_runs(runs, patterns) if patterns else []
    verdict = rank(runs, **options)  # the verdict alone: a sweep's curves are not aligned
    if not verdict.run_values:
        raise UsageError("--top needs a verdict to rank the runs by, and there is none "
                         f"({verdict}); pick runs with --runs instead")
    best = list(verdict.run_values)[:top]
    keep = set(best) | {run.name for run in named}
    chosen = [run for run in runs if run.name in keep]
    comparison = compare(chosen, **options)
    if len(chosen) == len(runs):
        return comparison
    comparison.finding_list.append(_left_out(runs, best, named, verdict, top))
    return comparison


def _left_out(runs: Sequence[Run], best: list[str], named: Sequence[Run], verdict: Any,
              top: int) -> Finding:
    from ..display import fmt

    extra = [run.name for run in named if run.name not in best]
    out = [run.name for run in runs if run.name not in best and run.name not in extra]
    plus = f", plus {_listed(extra)} named by --runs" if extra else ""
    unranked = len(runs) - len(verdict.run_values)
    why = f" ({unranked} had no value at the budget)" if unranked else ""
    return Finding("info", "top-runs",
                   f"--top {top}: the best {len(best)} of {len(runs)} runs by {verdict.metric} "
                   f"at {verdict.axis} {fmt(verdict.budget)} ({_listed(best)}){plus}; "
                   f"{len(out)} left out{why}: {_listed(out)}")


def _listed(names: Sequence[str]) -> str:
    from ..display import listing

    return listing(list(names)) or "none"
