"""Static figures (PNG, SVG) of a comparison's charts, drawn by kaleido in the installed
chromium: no browser download, and the browser's networking off.

The page kaleido draws in and plotly.js are local files and MathJax is off, so a figure needs
no network. Everything else the browser would fetch (its own update, time and account
requests, a URL planted in a figure) goes to the one proxy it is given (choreographer's
``proxy_server``, Chromium's ``--proxy-server``): a loopback port held closed while it draws,
so no host name is resolved and no connection leaves the machine.

Each figure is marked as runcompare's (a PNG ``tEXt`` chunk ``Software: runcompare`` after
``IHDR``; an SVG opening with ``<!-- runcompare -->``) and replaces only such a figure
(:mod:`runcompare.outputs`).

Needs the ``static`` extra (``pip install 'runcompare[static]'``) and a Chromium or Chrome on
PATH (Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..analysis import Comparison
from ..display import plotly_text
from ..errors import MissingInfoError
from ..outputs import claim, head, write_atomic
from .charts import AXIS_LABELS, FEW_POINTS, PALETTE, axis_values, chart

__all__ = ["FORMATS", "figure", "is_figure", "write_figures"]

FORMATS = ("png", "svg")
_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_TEXT = b"Software\0runcompare"
#: The chunk that marks a PNG as runcompare's, right after the 8-byte signature and IHDR (25).
_PNG_MARK = (struct.pack(">I", len(_TEXT)) + b"tEXt" + _TEXT
             + struct.pack(">I", zlib.crc32(b"tEXt" + _TEXT)))
_PNG_AT = 8 + 25
_SVG_MARK = b"<!-- runcompare -->\n"


def write_figures(comparison: Comparison, folder: Path, *,
                  formats: tuple[str, ...] = ("png",)) -> list[Path]:
    """One file per shared metric and format in ``folder`` (made if missing); the paths.

    Raises :class:`~runcompare.errors.InputError`, before drawing anything, when a figure's
    path is inside a run being read or holds a file that is not a figure runcompare drew.
    """
    figures = {}
    for metric in comparison.metrics:
        figure = _figure(comparison, chart(comparison, metric))
        stem = re.sub(r"[^A-Za-z0-9._-]+", "_", metric).strip("_") or "metric"
        for fmt in formats:
            path = folder / f"{stem}.{fmt}"
            claim(path, runs=comparison.runs, what=f"a {fmt.upper()} figure", ours=is_figure,
                  fix="choose another --output for the report the figures go beside")
            figures[path] = figure
    _draw(figures)
    return list(figures)


def figure(comparison: Comparison, metric: str) -> dict[str, Any]:
    """The plotly figure dict of one drawn metric, as ``write_figures`` draws it (raw faint,
    smoothed bold, long traces downsampled with their extremes kept)."""
    return _figure(comparison, chart(comparison, metric))


def _draw(figures: dict[Path, dict[str, Any]]) -> None:
    """Draw each figure into a scratch folder, then mark it and move it to its path."""
    try:
        import kaleido
    except ImportError as exc:
        raise MissingInfoError("static figures need kaleido: pip install 'runcompare[static]' "
                               "(it draws with the installed chromium)") from exc
    with tempfile.TemporaryDirectory(prefix="runcompare-figures-") as scratch:
        drawn = [Path(scratch) / f"{i}{path.suffix}" for i, path in enumerate(figures)]
        jobs = [{"fig": figure, "path": at,
                 "opts": {"format": path.suffix[1:], "width": 1000, "height": 520}}
                for at, (path, figure) in zip(drawn, figures.items())]
        with _nowhere() as proxy:
            try:  # a figure that fails to draw is given back, not raised (kaleido 1.x)
                failed = kaleido.write_fig_from_object_sync(
                    jobs, kopts={"mathjax": False, "proxy_server": proxy})
            except Exception as exc:  # kaleido's own errors: no browser, a browser that failed
                raise MissingInfoError(f"kaleido could not draw the figures ({exc}); install "
                                       "chromium (apt-get install chromium)") from exc
        missing = [path.name for at, path in zip(drawn, figures) if not at.is_file()]
        if failed or missing:
            why = "; ".join(str(error) or type(error).__name__ for error in failed or ())
            raise MissingInfoError(
                f"the browser could not draw {', '.join(missing) or 'every figure'} "
                f"({why or 'kaleido gave no reason'}); run the command again, or leave out "
                "--png/--svg")
        for at, path in zip(drawn, figures):
            write_atomic(path, _marked(at.read_bytes()))


@contextlib.contextmanager
def _nowhere() -> Iterator[str]:
    """A proxy URL that refuses every connection: a loopback port bound, never listened on,
    while the browser runs (so no other program can take it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
        closed.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{closed.getsockname()[1]}"


def _marked(data: bytes) -> bytes:
    """A figure kaleido drew, with runcompare's mark (see the module docstring)."""
    if data.startswith(_SIGNATURE) and data[12:16] == b"IHDR":
        return data[:_PNG_AT] + _PNG_MARK + data[_PNG_AT:]
    return _SVG_MARK + data


def is_figure(path: Path) -> bool:
    """Whether ``path`` is a PNG or SVG figure that runcompare drew (its mark)."""
    start = head(path, _PNG_AT + len(_PNG_MARK))
    return (start.startswith(_SIGNATURE) and start[_PNG_AT:] == _PNG_MARK
            or start.startswith(_SVG_MARK))


def _figure(comparison: Comparison, drawn: dict[str, Any]) -> dict[str, Any]:
    """A plotly figure dict: per run, values as logged (faint) and smoothed (bold)."""
    names = [run.name for run in comparison.runs]
    traces = []
    label = AXIS_LABELS.get(comparison.x, comparison.x)
    for trace in drawn["traces"]:
        colour = PALETTE[names.index(trace["run"]) % len(PALETTE)]
        x = axis_values(trace, comparison.x)
        if comparison.x == "wall_time":  # plotly's date axis reads milliseconds
            x = [None if v is None else v * 1000 for v in x or []]
        name = plotly_text(trace["run"])
        if len(trace["y"]) <= FEW_POINTS:  # markers: a few points are points, not a line
            traces.append({"type": "scatter", "mode": "lines+markers", "x": x,
                           "y": trace["y"].tolist(), "line": {"width": 2, "color": colour},
                           "name": name})
            continue
        traces.append({"type": "scatter", "mode": "lines", "x": x, "y": trace["y"].tolist(),
                       "opacity": 0.3, "line": {"width": 1, "color": colour},
                       "showlegend": False, "name": name})
        traces.append({"type": "scatter", "mode": "lines", "x": x,
                       "y": trace["smoothed"].tolist(), "line": {"width": 2.5, "color": colour},
                       "name": name})
    layout = {"title": {"text": plotly_text(f"{drawn['metric']} against {label}")},
              "template": "plotly_white",
              "xaxis": {"title": {"text": plotly_text(label)},
                        **({"type": "date"} if comparison.x == "wall_time" else {})},
              "yaxis": {"title": {"text": plotly_text(drawn["metric"])}}}
    return {"data": traces, "layout": layout}
