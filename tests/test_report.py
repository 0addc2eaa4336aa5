"""The HTML report: self-contained, escaped, deterministic."""

from __future__ import annotations

import json
import re
import shutil

import pytest

import runcompare as rc
from runcompare.report.html import render_report

from .conftest import DATA, SAMPLES


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


def test_verdict_names_the_first_run_to_the_target_and_the_fairness():
    from runcompare.report.verdict import verdict

    runs = rc.load_many([SAMPLES / "attn", DATA / "hf_global32"],
                        settings=["hf_global32:seq_len=64"])
    fair = rc.compare(runs, x="tokens", metrics=["train/loss"], target=4.5)
    rows = fair.summary.sort("x_to_target")
    first, second = rows.row(0, named=True), rows.row(1, named=True)
    text = verdict(fair)
    assert text.startswith(f"{first['run']} reaches train/loss ≤ 4.5 first, after "
                           f"{first['x_to_target']:,.0f} tokens: "
                           f"{second['x_to_target'] / first['x_to_target']:.2f}× sooner than "
                           f"{second['run']}")
    assert "Not a fair comparison as it stands" in text and "lr-not-rescaled" in text
    on_steps = verdict(rc.compare(runs, x="step", metrics=["train/loss"], target=4.5))
    assert "global-batch-mismatch" in on_steps
    matched = verdict(rc.compare(rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"])))
    assert matched.endswith("No fairness warnings: tokens is a fair axis for these runs.")
