"""The notebook in docs/ executed cell by cell (each cell's last expression is what a notebook
shows, as IPython does): a Run and a Comparison show their HTML view, a chart is a plotly
Figure, the findings are a frame, the report is written."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import plotly.graph_objects as go
import polars as pl
import pytest

import runcompare as rc

from .conftest import ROOT

NOTEBOOK = ROOT / "docs" / "notebook.ipynb"


def _run_cells(path):
    """Each code cell's shown value (None when its last statement is not an expression)."""
    namespace: dict[str, object] = {}
    shown = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        tree = ast.parse("".join(cell["source"]))
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, str(path), "exec"), namespace)  # noqa: S102 - our own notebook
        shown.append(eval(compile(ast.Expression(last.value), str(path), "eval"), namespace)
                     if last is not None else None)
    return shown


def test_the_notebook_shows_html_views_and_a_figure(tmp_path, monkeypatch):
    for name in ("sample_logs",):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    attn, comparison, figure, findings, report = _run_cells(NOTEBOOK)
    assert isinstance(attn, rc.Run) and isinstance(comparison, rc.Comparison)
    run_view = attn._repr_html_()
    assert "<b>attn</b> (hf-trainer" in run_view and "100 optimizer steps" in run_view
    assert 'title="runcompare.toml: seq_len">64</td>' in run_view  # the source on hover
    view = comparison._repr_html_()
    assert html_text(str(comparison)) in view  # the verdict, first
    assert view.index(html_text(str(comparison))) < view.index("batch hierarchy")
    assert "<th>tokens to target</th>" in view and "eval/loss" in view
    assert isinstance(figure, go.Figure)
    assert figure.layout.title.text == "eval/loss against tokens"  # the axis drawn, named
    drawn = {trace.name for trace in figure.data}
    # four evaluations a run: each drawn as logged, with markers (no smoothed copy of so few)
    assert drawn == {"mamba", "attn"} and len(figure.data) == 2
    raw = next(t for t in figure.data if t.name == "attn")
    assert "markers" in raw.mode
    evals = attn.frame(x="tokens").filter(metric="eval/loss").sort("x")
    assert list(raw.x) == evals["x"].to_list()
    assert list(raw.y) == pytest.approx(evals["value"].to_list(), rel=1e-6)  # as the report draws
    assert isinstance(findings, pl.DataFrame)
    assert findings.columns == ["level", "code", "message", "run"]
    assert findings.height == len(comparison.findings)
    assert report == Path("reports/notebook.html")
    assert (tmp_path / report).stat().st_size > 1_000_000  # plotly.js embedded


def html_text(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def test_short_reprs():
    runs = rc.load_many([ROOT / "sample_logs" / "mamba", ROOT / "sample_logs" / "attn"])
    assert repr(runs[1]) == ("<Run 'attn' (hf-trainer): 100 optimizer steps, "
                             f"{runs[1].scalars.height} points of {len(runs[1].metrics)} "
                             "metrics, global batch 16, 1,024 tokens/step, "
                             f"{len(runs[1].findings)} findings>")
    comparison = rc.compare(runs, x="tokens")
    assert repr(comparison) == (f"<Comparison of mamba, attn on tokens: within-noise on "
                                f"eval/loss; {len(comparison.metrics)} metrics, "
                                f"{len(comparison.findings)} findings>")
    assert len(repr(comparison)) < 200 and len(repr(runs[0])) < 200


def test_findings_are_one_type_everywhere():
    run = rc.load(ROOT / "sample_logs" / "attn")
    comparison = rc.compare([run, rc.load(ROOT / "sample_logs" / "mamba")])
    plan = rc.plan_batch(per_device_batch=8, world_size=1024, global_batch=4096)
    for findings in (run.findings, comparison.findings):
        assert isinstance(findings, rc.Findings)
    assert isinstance(plan.findings, rc.Findings) and plan.findings[0].code == "accum-overshoot"
    frame = run.findings.to_frame()
    assert frame["code"].to_list() == [f.code for f in run.findings]
    assert frame["run"].to_list() == ["attn"] * len(run.findings)


def test_a_figure_of_a_metric_not_drawn_suggests_the_close_ones():
    comparison = rc.compare(rc.load_many([ROOT / "sample_logs" / "mamba",
                                          ROOT / "sample_logs" / "attn"]), x="tokens")
    try:
        comparison.figure("loss")
    except rc.UnknownMetricError as exc:
        assert str(exc).startswith("'loss' is not drawn in this comparison; did you mean "
                                   "'eval/loss' or 'train/loss'? drawn: eval/loss, train/loss")
    else:
        raise AssertionError("no error")


def test_load_takes_what_load_many_takes(tmp_path):
    folder = ROOT / "tests" / "data" / "text" / "pattern"
    pattern = (r"(?P<wall_time>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) ep \d+ it (?P<step>\d+) "
               r"train_loss (?P<loss>\S+) acc (?P<acc>\S+)")
    one = rc.load(folder, pattern=pattern, settings=["seq_len=32"])
    many, = rc.load_many([folder], pattern=pattern, settings=["seq_len=32"])
    assert one.scalars.equals(many.scalars) and one.batch.seq_len.value == 32
    config = ROOT / "tests" / "data" / "axolotl" / "axolotl.yml"
    run = rc.load(ROOT / "tests" / "data" / "hf_global32", config=config)
    assert run.batch.seq_len == rc.Fact(64, "axolotl.yml: sequence_len", "config")
