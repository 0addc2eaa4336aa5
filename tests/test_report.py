"""The HTML report: self-contained, escaped, deterministic."""

from __future__ import annotations

import html
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
    drawn = [c["metric"] for c in data["charts"]]
    assert sorted(drawn) == sorted(comparison.metrics)
    assert drawn[:2] == [comparison.main, "train/learning_rate"] == ["eval/loss", drawn[1]]
    loss = next(c for c in data["charts"] if c["metric"] == "train/loss")
    for trace, run in zip(loss["traces"], comparison.runs):
        frame = run.scalars.filter(metric="train/loss")
        assert trace["run"] == run.name and trace["points"] == frame.height == 20
        assert trace["y"] == pytest.approx(frame["value"].to_list(), rel=1e-6)
        assert len(trace["smoothed"]) == 20 and trace["smoothed"][0] == trace["y"][0]
        assert trace["x"]["step"] == frame["step"].to_list()  # whole numbers as integers
        # tokens are steps × 1,024 in every point: carried as that factor, not as numbers
        assert trace["derived"]["tokens"] == ["step", 1024.0] and "tokens" not in trace["x"]
        assert trace["origin"]["wall_time"] == frame["wall_time"].min()
        assert [w + trace["origin"]["wall_time"] for w in trace["x"]["wall_time"]] == \
            pytest.approx(frame["wall_time"].to_list(), abs=1e-3)


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
    drawn = {c["metric"] for c in _data(page)["charts"]}
    totals = {"train/train_runtime", "train/train_samples_per_second",
              "train/train_steps_per_second", "train/total_flos", "train/train_loss"}
    assert not drawn & totals
    assert set(comparison.totals["metric"]) == totals
    table = page[page.index("<h2>End-of-run totals</h2>"):]
    assert "<th>train/train_runtime</th><td>78.49</td><td>10.73</td>" in table
    assert page.count("<h2>Schedules and diagnostics</h2>") == 1


def test_numbers_are_written_in_bulk_as_seven_significant_digits():
    import numpy as np

    from runcompare.report.charts import encode, numbers

    rng = np.random.default_rng(7)
    values = rng.normal(size=2_000) * 10.0 ** rng.integers(-12, 15, size=2_000)
    values[[3, 50]] = np.nan, np.inf
    written = json.loads(encode({"v": numbers(values), "i": numbers(np.array([4096.0, 2**40]))}))
    expected = [None if not np.isfinite(v) else float(f"{v:.7g}") for v in values]
    assert written["v"] == expected
    assert written["i"] == [4096, 2**40] and all(type(v) is int for v in written["i"])


def test_the_drawing_budget_bounds_a_sweep():
    from runcompare.report.charts import MAX_POINTS, MIN_POINTS, TOTAL_POINTS, limits

    names = [f"r{i}" for i in range(500)]
    one = limits(["train/loss"], names, names[:8])
    assert sum(one.values()) <= TOTAL_POINTS
    assert one[("train/loss", "r0")] == MAX_POINTS and one[("train/loss", "r9")] == TOTAL_POINTS // 2 // 492
    many = limits([f"m{i}" for i in range(12)], names, names[:8])
    assert min(many.values()) == MIN_POINTS  # every run keeps its shape, however many


def test_the_hierarchy_marks_rows_that_differ_and_carries_each_source():
    comparison = _comparison(SAMPLES / "mamba", SAMPLES / "attn", x="tokens")
    page = render_report(comparison)
    marked = re.findall(r"<tr class=differ><th>([^<]+) <span", page)
    assert marked == ["micro-batch", "grad accumulation", "micro-steps"]  # 8×2 against 2×8
    mamba = comparison.runs[0]
    source = html.escape(mamba.batch.per_device_batch.source, quote=True)
    assert f'<button type="button" class="src" data-src="{source}">8</button>' in page
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page


def test_a_sweep_leads_with_a_leaderboard_and_groups_its_findings(sweep):
    page = render_report(sweep)
    data = _data(page)
    assert "<title>200 runs</title>" in page and "<h1>200 runs</h1>" in page
    board = page[page.index("<h2>Leaderboard</h2>"):page.index("<h2>Curves</h2>")]
    ranked = re.findall(r'</span>(lr_\d+)</th><td>([^<]+)</td>', board)
    values = sweep.verdict.run_values
    assert [name for name, _ in ranked] == list(values) and len(ranked) == 200
    assert ranked[0][0] == "lr_001"  # the smallest losses: the 2-sequence batches
    # enough digits that no two different values print the same, and each reads back close
    printed = [value for _, value in ranked]
    assert len(set(printed)) == len(set(values.values())) == 200
    assert all(float(p) == pytest.approx(values[n], rel=1e-4) for n, p in ranked)
    # only the levels that differ are columns (the micro-batch, so the global batch, tokens
    # and samples per step); the sequence length, the same in every run, is said once
    header = board[board.index("<tr>"):board.index("</tr>")]
    assert "<th>micro-batch</th>" in header and "<th>sequence length</th>" not in header
    assert "the same in every run: " in board and "sequence length 64" in board
    # the metric by each differing setting: a row per value, best first
    by = board[board.index("by setting</h3>"):]
    assert by.count("<table class=bykey>") == 1  # the micro-batch: 2 or 4
    rows = re.findall(r"<tr><th>(\d)</th><td>(\d+)</td><td>([^<]+)</td>", by)
    assert [(key, int(n)) for key, n, _ in rows] == [("2", 100), ("4", 100)]
    assert float(rows[0][2]) == pytest.approx(values["lr_001"], rel=1e-4)
    assert data["top"] == list(values)[:8]
    findings = page[page.index('<h2 id="findings">'):page.index("<h2>End-of-run totals</h2>")]
    kinds = {(f.level, f.code) for f in sweep.finding_list}
    assert findings.count("<li ") == len(kinds) < len(sweep.finding_list)
    batch = [f for f in sweep.finding_list if f.code == "batch-mismatch"]
    assert f"<code>batch-mismatch</code> × {len(batch)} ({len(batch)} runs)" in findings
    drawn = sum(len(t["y"]) for c in data["charts"] for t in c["traces"])
    logged = sum(run.scalars.height for run in sweep.runs)
    assert drawn <= logged and len(page.encode()) < 15e6


def test_seed_bands_follow_the_axis_switch_where_the_seeds_agree():
    """Three real seeds of one configuration (tests/data/hf_seeds): the band is on every axis
    the seeds share point for point (16 sequences of 64 tokens a step), and on none where they
    disagree (their wall-clock)."""
    seeds = DATA / "hf_seeds"
    comparison = rc.compare(rc.load_many([seeds / f"lr1e-3_seed{i}" for i in (1, 2, 3)]),
                            x="step")
    charts = {c["metric"]: c for c in _data(render_report(comparison))["charts"]}
    band = charts["eval/loss"]["bands"][0]
    assert band["group"] == "lr1e-3" and band["n"] == 3
    assert band["x"]["step"] == [10, 20, 30, 40]
    assert band["x"]["samples"] == [160, 320, 480, 640]
    assert band["x"]["tokens"] == [10240, 20480, 30720, 40960]
    assert "elapsed" not in band["x"] and "wall_time" not in band["x"]


def test_the_page_opens_on_the_headline_the_key_numbers_and_the_main_chart():
    comparison = rc.compare(rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"]))
    page = render_report(comparison)
    body = page[page.index("<h1>"):]
    order = [body.index(mark) for mark in ('id="rc-headline"', 'class="cards"', 'id="rc-axis"',
                                           'id="chart-0"', '<details class="prose">',
                                           "<h2>Batch hierarchy</h2>", 'id="chart-1"')]
    assert order == sorted(order)
    assert (f'<p id="rc-headline" class="headline call-within-noise">'
            f"{comparison.verdict.headline}</p>") in body
    values = re.findall(r'<div class="value">([^<]+)</div>', body)
    assert values == [html.escape(c["value"]) for c in comparison.verdict.key_numbers]
    assert values[0] == "0.8%" and values[2] == "7.9× less for attn"
