"""What the report's charts draw: every run's points on every axis, raw and smoothed, reduced
for drawing only.

Values are drawn to 7 significant digits, formatted in bulk (:func:`numbers`). An axis that is
another axis times one number for the whole trace (tokens = steps × tokens per step, FLOPs =
tokens × FLOPs per token, device-hours = elapsed × world size ÷ 3600, ...) is not carried as
numbers: the page multiplies (``derived``). Wall-clock times are carried as seconds after the
trace's first one (``origin``), so 7 digits keep sub-second detail.

Drawing has a budget (:func:`limits`): the main chart gets half of :data:`TOTAL_POINTS`, the
other charts share the rest, and within a chart the runs drawn in colour get more than the
faint ones, never more than :data:`MAX_POINTS` each nor fewer than :data:`MIN_POINTS`. A trace
longer than its limit is drawn from its first and last point and the minimum and maximum of
each of ``limit // 2`` buckets (:func:`downsample`), so spikes and dips stay visible;
smoothing runs on all points before that, and the summary numbers never see the reduction.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from ..analysis import Comparison
from ..model import Run

__all__ = ["AXIS_LABELS", "FEW_POINTS", "MAX_POINTS", "MIN_POINTS", "PALETTE", "TOTAL_POINTS",
           "Numbers", "axis_values", "chart", "downsample", "encode", "json_for_script", "limits",
           "numbers"]

MAX_POINTS = 2_000
#: A trace of at most this many points is drawn as points (markers), as logged.
FEW_POINTS = 30
MIN_POINTS = 64
#: Points drawn over every trace of a report (a point: one x position of one trace).
TOTAL_POINTS = 150_000

#: The colours of the runs drawn in colour, in order (the static figures' too).
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")

#: Axes the page can switch between, with their labels (units included).
AXIS_LABELS = {"step": "optimizer steps", "micro_step": "micro-steps", "samples": "samples",
               "tokens": "tokens", "epoch": "epochs", "elapsed": "elapsed time (s)",
               "wall_time": "wall-clock time (UTC)", "flops": "training FLOPs",
               "device_hours": "device-hours"}
#: Axes an axis may be derived from by one factor, in the order they are tried.
_BASES = {"micro_step": ("step",), "samples": ("step",), "tokens": ("samples", "step"),
          "flops": ("tokens", "samples", "step"), "device_hours": ("elapsed",)}


class Numbers:
    """An array of numbers for the page's JSON, written out in bulk by :func:`encode` (or
    on first use of ``text``)."""

    __slots__ = ("_text", "values", "whole")

    def __init__(self, values: np.ndarray) -> None:
        self.values = np.asarray(values, dtype=np.float64)
        kept = self.values[np.isfinite(self.values)]
        self.whole = bool((np.abs(kept) < 2.0**53).all() and (kept == np.round(kept)).all())
        self._text: str | None = None

    def __len__(self) -> int:
        return self.values.size

    @property
    def text(self) -> str:
        if self._text is None:
            _write([self])
        return self._text  # type: ignore[return-value]

    def tolist(self) -> list[float | None]:
        import json

        values: list[float | None] = json.loads(self.text)
        return values


def numbers(values: np.ndarray) -> Numbers:
    """``values`` for the page: non-finite as null (a gap), whole numbers as integers when
    all are whole, others to 7 significant digits (float32 precision, finer than a chart or
    hover shows).

    >>> numbers(np.array([1.0, 2.0, np.nan])).text, numbers(np.array([0.123456789, 2e20])).text
    ('[1,2,null]', '[0.1234568,2e+20]')
    """
    return Numbers(values)


def _write(arrays: Sequence[Numbers]) -> None:
    """Every array's JSON text at once: one rounding, one formatting and one join for all."""
    arrays = [a for a in arrays if a._text is None]
    for empty in (a for a in arrays if not len(a)):
        empty._text = "[]"
    arrays = [a for a in arrays if len(a)]
    if not arrays:
        return
    values = np.concatenate([a.values for a in arrays])
    whole = np.repeat(np.array([a.whole for a in arrays]), [len(a) for a in arrays])
    finite = np.isfinite(values)
    rounded = np.where(finite & ~whole, _significant(values, 7), values)
    rounded[~finite] = np.nan
    frame = pl.DataFrame({"id": np.repeat(np.arange(len(arrays)), [len(a) for a in arrays]),
                          "v": rounded, "whole": whole}).with_columns(pl.col("v").fill_nan(None))
    texts = (frame.lazy().select("id", pl.when("whole")
                                 .then(pl.col("v").cast(pl.Int64).cast(pl.String))
                                 .otherwise(pl.col("v").cast(pl.String)).fill_null("null")
                                 .alias("s"))
             .group_by("id", maintain_order=True).agg(pl.col("s").str.join(","))
             .collect().get_column("s").to_list())
    for array, text in zip(arrays, texts):
        array._text = f"[{text}]"


def _significant(v: np.ndarray, digits: int) -> np.ndarray:
    """``v`` rounded to ``digits`` significant digits (exact powers of ten either way, so the
    result is the double nearest the rounded decimal)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        magnitude = np.floor(np.log10(np.abs(v)))
        shift = np.where(np.isfinite(magnitude), digits - 1 - magnitude, 0).clip(-22, 22)
        up = np.where(shift >= 0, 10.0 ** np.abs(shift), 1.0)
        down = np.where(shift < 0, 10.0 ** np.abs(shift), 1.0)
        return np.where(v == 0, 0.0, np.round(v * up / down) / up * down)


def encode(data: Any) -> str:
    """``data`` as compact JSON with sorted keys; every :class:`Numbers` in it written out
    in bulk first."""
    found: list[Numbers] = []
    _collect(data, found)
    _write(found)
    return _encode(data)


def json_for_script(data: Any) -> str:
    """:func:`encode`'s JSON, made so that it cannot end the <script> element it sits in."""
    text = encode(data)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _collect(data: Any, found: list[Numbers]) -> None:
    if isinstance(data, Numbers):
        found.append(data)
    elif isinstance(data, dict):
        for value in data.values():
            _collect(value, found)
    elif isinstance(data, (list, tuple)):
        for value in data:
            _collect(value, found)


def _encode(data: Any) -> str:
    import json

    if isinstance(data, Numbers):
        return data.text
    if isinstance(data, dict):
        return "{" + ",".join(f"{_encode(str(k))}:{_encode(data[k])}" for k in sorted(data)) + "}"
    if isinstance(data, (list, tuple)):
        return "[" + ",".join(_encode(item) for item in data) + "]"
    if isinstance(data, float) and not np.isfinite(data):
        return "null"
    return json.dumps(data, ensure_ascii=False)


def downsample(values: np.ndarray, limit: int = MAX_POINTS) -> np.ndarray:
    """Indices to draw: all when few, else first, last and each bucket's min and max.

    >>> downsample(np.array([0., 5, 1, 1, -3, 1, 1, 2]), limit=4).tolist()
    [0, 1, 4, 7]
    """
    n = values.size
    if n <= limit:
        return np.arange(n)
    buckets = max(limit // 2, 1)
    edges = np.linspace(0, n, buckets + 1).astype(np.int64)[:-1]
    finite = np.isfinite(values)
    low = np.minimum.reduceat(np.where(finite, values, np.inf), edges)
    high = np.maximum.reduceat(np.where(finite, values, -np.inf), edges)
    bucket = np.repeat(np.arange(buckets), np.diff(np.append(edges, n)))
    keep = [np.array([0, n - 1]), edges[np.isinf(low)]]  # a non-finite bucket: one, for its gap
    for extreme in (low, high):
        hit = np.flatnonzero(finite & (values == extreme[bucket]))
        keep.append(hit[np.unique(bucket[hit], return_index=True)[1]])  # each bucket's first
    return np.unique(np.concatenate(keep))


def limits(metrics: Sequence[str], runs: Sequence[str], top: Sequence[str],
           total: int = TOTAL_POINTS) -> dict[tuple[str, str], int]:
    """Each (metric, run)'s most drawn points: half the budget to the first (main) chart, the
    rest shared by the others; in a chart, the runs in colour (``top``) share half of it when
    others are drawn faint.

    >>> limits(["a", "b"], ["r1", "r2", "r3"], ["r1"], total=4000)[("a", "r1")]
    1000
    """
    out = {}
    for i, metric in enumerate(metrics):
        budget = total if len(metrics) == 1 else total // 2 if i == 0 else \
            total // 2 // (len(metrics) - 1)
        faint = [r for r in runs if r not in top]
        shares = {r: budget // (2 if faint else 1) // max(len(top), 1) for r in top}
        shares.update({r: budget // 2 // len(faint) for r in faint})
        out.update({(metric, r): int(np.clip(s, MIN_POINTS, MAX_POINTS))
                    for r, s in shares.items()})
    return out


def chart(comparison: Comparison, metric: str,
          limit: dict[str, int] | None = None) -> dict[str, Any]:
    """One chart: a trace per run (every axis it has, raw and smoothed y, as
    :meth:`~runcompare.analysis.compare.Comparison.drawn` gives them), bands per group;
    ``limit`` maps a run to its most drawn points (default :data:`MAX_POINTS`)."""
    traces = [t for run, points in zip(comparison.runs, comparison.drawn(metric))
              if (t := _trace(run.name, points, (limit or {}).get(run.name, MAX_POINTS)))]
    bands = comparison.bands.filter(pl.col("metric") == metric)
    members = {r.name: r for r in comparison.runs}
    return {"metric": metric, "traces": traces,
            "bands": [_band(bands.filter(pl.col("group") == g), g, metric, comparison.x,
                            [members[n] for n in comparison.groups.get(g, []) if n in members])
                      for g in bands.get_column("group").unique(maintain_order=True).to_list()]}


def _trace(run: str, points: pl.DataFrame, limit: int) -> dict[str, Any] | None:
    """The trace of run ``run``'s drawn ``points``, at most ``limit`` of them."""
    if points.is_empty():
        return None
    smoothed = points.get_column("smoothed").to_numpy()
    values = points.get_column("value").to_numpy()
    keep = downsample(values, limit)
    columns = {axis: points.get_column(axis).cast(pl.Float64).to_numpy()  # nulls as NaN
               for axis in AXIS_LABELS if points.get_column(axis).null_count() < points.height}
    derived = _derived(columns, points.height)
    origin = {}
    if "wall_time" in columns:
        origin["wall_time"] = float(np.nanmin(columns["wall_time"]))
        columns["wall_time"] = columns["wall_time"] - origin["wall_time"]
    axes = {axis: numbers(column[keep]) for axis, column in columns.items() if axis not in derived}
    return {"run": run, "points": points.height, "x": axes, "derived": derived,
            "origin": origin, "y": numbers(values[keep]), "smoothed": numbers(smoothed[keep])}


def _derived(columns: dict[str, np.ndarray], height: int) -> dict[str, list[Any]]:
    """Axes that are one of their bases × one number at every point: axis -> [base, factor]."""
    derived: dict[str, list[Any]] = {}
    for axis, bases in _BASES.items():
        values = columns.get(axis)
        if values is None or np.isnan(values).any():
            continue
        for base in bases:
            of = columns.get(base)
            if of is None or base in derived or np.isnan(of).any() or (of <= 0).any():
                continue
            ratio = values / of
            if np.allclose(ratio, ratio[0], rtol=1e-12, atol=0):
                derived[axis] = [base, float(ratio[0])]
                break
    return derived


def axis_values(trace: dict[str, Any], axis: str) -> list[float | None] | None:
    """A trace's drawn x values on ``axis`` as numbers (what the page computes), or None."""
    if axis in trace["derived"]:
        base, factor = trace["derived"][axis]
        values = axis_values(trace, base)
        return None if values is None else [None if v is None else v * factor for v in values]
    if axis not in trace["x"]:
        return None
    values = trace["x"][axis].tolist()
    shift = trace["origin"].get(axis, 0)
    return [None if v is None else v + shift for v in values]


def _band(frame: pl.DataFrame, group: str, metric: str, x: str,
          members: list[Run]) -> dict[str, Any]:
    keep = downsample(frame.get_column("mean").to_numpy())
    grid = frame.get_column("x").to_numpy()[keep]
    axes = {x: numbers(grid)}
    for axis in AXIS_LABELS:
        if axis != x and (mapped := _mapped(grid, metric, x, axis, members)) is not None:
            axes[axis] = numbers(mapped)
    column = {c: numbers(frame.get_column(c).to_numpy()[keep]) for c in ("mean", "min", "max")}
    return {"group": group, "n": int(frame.get_column("n").to_numpy().max(initial=0)), "x": axes,
            **column}


def _mapped(grid: np.ndarray, metric: str, x: str, axis: str,
            members: list[Run]) -> np.ndarray | None:
    """The band's x positions on ``axis`` when every member logged that axis at each of its
    points and the members agree on where each position lies (else None: no band there)."""
    mapped = []
    for run in members:
        points = run.scalars.filter(pl.col("metric") == metric).select(x, axis).sort(x)
        if points.is_empty() or points.null_count().row(0) != (0, 0):
            return None
        xs, ys = (points.get_column(c).cast(pl.Float64).to_numpy() for c in (x, axis))
        inside = (grid >= xs[0]) & (grid <= xs[-1])
        mapped.append(np.where(inside, np.interp(grid, xs, ys), np.nan))
    if not mapped:
        return None
    stack = np.vstack(mapped)
    with warnings.catch_warnings():  # a position no member covers stays NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        low: np.ndarray = np.nanmin(stack, axis=0)
        high = np.nanmax(stack, axis=0)
    if not np.allclose(low, high, rtol=1e-9, atol=0, equal_nan=True):
        return None
    return low


def hidden_points(charts: Sequence[dict[str, Any]]) -> int:
    """How many logged points the drawing leaves out, over every trace."""
    return sum(t["points"] - len(t["y"]) for c in charts for t in c["traces"])
