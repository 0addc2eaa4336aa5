"""The HTML report: self-contained, escaped, deterministic."""

from __future__ import annotations

import html
import json
import re
import shutil

import pytest

import runcompare as rc
from runcompare.report.html import render_report

from .conftest import SAMPLES


def _comparison(*paths, **kwargs):
    return rc.compare(rc.load_many(paths), **kwargs)


def _data(page: str) -> dict:
    block = re.search(r'<script type="application/json" id="rc-data">(.*?)</script>', page, re.DOTALL)
    return json.loads(block.group(1))


def test_same_inputs_same_bytes():
    paths = (SAMPLES / "mamba", SAMPLES / "attn")
    assert render_report(_comparison(*paths, x="tokens")) == \
        render_report(_comparison(*paths, x="tokens"))


def test_self_contained_no_network():
    page = render_report(_comparison(SAMPLES / "mamba", SAMPLES / "attn", x="tokens"))
    assert page.count("<script") == 3  # plotly.js, the data, the drawing code
    assert not re.search(r'<(script|link|img|iframe)[^>]+(src|href)=', page)
    assert "default-src 'none'" in page


def test_one_chart_per_shared_metric_with_every_point():
    comparison = _comparison(SAMPLES / "mamba", SAMPLES / "attn", x="tokens")
    data = _data(render_report(comparison))
    drawn = [c["metric"] for c in data["charts"]] + [data["lr"]["metric"]]
    assert sorted(drawn) == sorted(comparison.metrics)
    assert data["charts"][0]["metric"] == comparison.main == "eval/loss"
    assert data["lr"]["axis"] == "tokens"
    loss = next(c for c in data["charts"] if c["metric"] == "train/loss")
    for trace, run in zip(loss["traces"], comparison.runs):
        frame = run.scalars.filter(metric="train/loss")
        assert trace["run"] == run.name and trace["points"] == frame.height == 20
        assert trace["y"] == pytest.approx(frame["value"].to_list(), rel=1e-6)
        assert len(trace["smoothed"]) == 20 and trace["smoothed"][0] == trace["y"][0]
        assert trace["x"]["tokens"] == [float(t) for t in frame["tokens"]]
        assert trace["x"]["step"] == [float(s) for s in frame["step"]]


def test_strings_from_logs_are_escaped(tmp_path):
    evil = tmp_path / "<b>x"
    shutil.copytree(SAMPLES / "attn", evil)
    run = rc.load(evil, name="<script>alert(1)</script>", seq_len=64)
    page = render_report(rc.compare([run], x="tokens"))
    assert "&lt;b&gt;x" in page and "<b>x" not in page  # the path, in the footer
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert _data(page)["charts"][0]["traces"][0]["run"] == "<script>alert(1)</script>"


def test_long_traces_are_reduced_for_drawing_keeping_extremes():
    import numpy as np

    from runcompare.report.charts import MAX_POINTS, downsample

    values = np.sin(np.linspace(0, 50, 100_000))
    values[12_345], values[67_890] = 40.0, -40.0  # a spike and a dip
    keep = downsample(values)
    assert len(keep) <= MAX_POINTS + 2
    assert {0, 99_999, 12_345, 67_890} <= set(keep.tolist())
    assert (np.diff(keep) > 0).all()  # in order, no repeats


def test_the_headline_is_the_verdict_and_the_totals_are_a_table_not_charts():
    comparison = _comparison(SAMPLES / "mamba", SAMPLES / "attn", x="tokens")
    page = render_report(comparison)
    headline = re.search(r'<p id="rc-verdict" class="verdict">(.*?)</p>', page).group(1)
    assert headline == html.escape(str(comparison), quote=True)
    assert "0.017 (0.8%)" in headline and "7.9× less for attn" in headline
    drawn = {c["metric"] for c in _data(page)["charts"]} | {_data(page)["lr"]["metric"]}
    totals = {"train/train_runtime", "train/train_samples_per_second",
              "train/train_steps_per_second", "train/total_flos", "train/train_loss"}
    assert not drawn & totals
    assert set(comparison.totals["metric"]) == totals
    table = page[page.index("<h2>End-of-run totals</h2>"):]
    assert "<th>train/train_runtime</th><td>78.49</td><td>10.73</td>" in table
    assert page.count("<h2>Schedules and diagnostics</h2>") == 1
