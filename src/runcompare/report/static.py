"""Static figures (PNG, SVG) of a comparison's charts, drawn by kaleido in the installed
chromium: no browser download, MathJax off so no network request is made.

Needs the ``static`` extra (``pip install 'runcompare[static]'``) and a Chromium or Chrome on
PATH (Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..analysis import Comparison
from ..display import plotly_text
from ..errors import MissingInfoError
from .charts import AXIS_LABELS, chart, drawing_smoothing

__all__ = ["FORMATS", "write_figures"]

FORMATS = ("png", "svg")
_PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf")


def write_figures(comparison: Comparison, folder: Path, *,
                  formats: tuple[str, ...] = ("png",)) -> list[Path]:
    """One file per shared metric and format in ``folder`` (made if missing); the paths."""
    try:
        import kaleido
    except ImportError as exc:
        raise MissingInfoError("static figures need kaleido: pip install 'runcompare[static]' "
                               "(it draws with the installed chromium)") from exc
    smoothing = drawing_smoothing(comparison)
    folder.mkdir(parents=True, exist_ok=True)
    jobs = []
    for metric in comparison.metrics:
        figure = _figure(comparison, chart(comparison, metric, smoothing))
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", metric).strip("_") or "metric"
        for fmt in formats:
            jobs.append({"fig": figure, "path": folder / f"{stem}.{fmt}",
                         "opts": {"format": fmt, "width": 1000, "height": 520}})
    try:
        kaleido.write_fig_from_object_sync(jobs, kopts={"mathjax": False})
    except Exception as exc:  # kaleido's own errors: no browser, a browser that failed
        raise MissingInfoError(f"kaleido could not draw the figures ({exc}); install "
                               "chromium (apt-get install chromium)") from exc
    return [job["path"] for job in jobs]


def _figure(comparison: Comparison, drawn: dict[str, Any]) -> dict[str, Any]:
    """A plotly figure dict: per run, values as logged (faint) and smoothed (bold)."""
    names = [run.name for run in comparison.runs]
    traces = []
    for trace in drawn["traces"]:
        colour = _PALETTE[names.index(trace["run"]) % len(_PALETTE)]
        x = trace["x"][comparison.x]
        name = plotly_text(trace["run"])
        traces.append({"type": "scatter", "mode": "lines", "x": x, "y": trace["y"],
                       "opacity": 0.3, "line": {"width": 1, "color": colour},
                       "showlegend": False, "name": name})
        traces.append({"type": "scatter", "mode": "lines", "x": x, "y": trace["smoothed"],
                       "line": {"width": 2.5, "color": colour}, "name": name})
    layout = {"title": {"text": plotly_text(drawn["metric"])}, "template": "plotly_white",
              "xaxis": {"title": {"text": plotly_text(AXIS_LABELS.get(comparison.x,
                                                                      comparison.x))}},
              "legend": {"orientation": "h"}}
    return {"data": traces, "layout": layout}
