"""Choosing what to compare: runs by name (``--runs REGEX``) and metrics by glob
(``--metric 'train/*'``); :func:`~.compare.choose` adds the best runs of a sweep (``--top N``).

``--runs`` keeps the runs whose name a pattern finds (:func:`re.search`; several patterns:
any of them).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence

from ..display import listing
from ..errors import UnknownMetricError, UsageError
from ..model import Run

__all__ = ["expand_metrics", "is_glob", "listed", "select_runs"]

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
                             f"{listed(names)}")
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


def listed(names: Sequence[str]) -> str:
    """``names`` as a listing ("a, b and c"), or "none"."""
    return listing(list(names)) or "none"
