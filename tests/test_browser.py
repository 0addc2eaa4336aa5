"""The report in a real browser: Debian's chromium, driven headless by Playwright.

No browser is downloaded: the test uses /usr/bin/chromium (``apt-get install chromium``; .ci/run
installs it) or $RUNCOMPARE_CHROMIUM. A missing browser fails the test; it is never skipped.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import pytest

import runcompare as rc
from runcompare.report import write_report

from .conftest import SAMPLES

CHROMIUM = os.environ.get("RUNCOMPARE_CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).is_file(), f"{CHROMIUM} missing: apt-get install chromium"
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield chromium
        chromium.close()


def _open(browser, report: Path):
    """A tab showing ``report``, recording console errors, requests and dialogs."""
    tab = browser.new_page(viewport={"width": 1200, "height": 900})
    tab.errors, tab.requests, tab.dialogs = [], [], []
    tab.on("console", lambda m: m.type == "error" and tab.errors.append(m.text))
    tab.on("pageerror", lambda e: tab.errors.append(str(e)))
    tab.on("request", lambda r: tab.requests.append(r.url))
    tab.on("dialog", lambda d: (tab.dialogs.append(d.message), d.dismiss()))
    tab.goto(report.as_uri())
    tab.wait_for_function("document.querySelectorAll('.chart .main-svg').length > 0")
    return tab


@pytest.fixture(scope="module")
def page(browser, tmp_path_factory):
    report = tmp_path_factory.mktemp("report") / "report.html"
    runs = rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"])
    write_report(rc.compare(runs, x="tokens"), report)
    tab = _open(browser, report)
    tab.report_url = report.as_uri()
    yield tab
    tab.close()


def test_loads_without_console_errors_or_network(page):
    assert page.errors == []
    assert page.requests == [page.report_url]


def test_every_chart_has_its_traces(page):
    counts = page.evaluate("""() => Array.from(document.querySelectorAll('.chart'))
        .map(div => [div.id, (div.data || []).length])""")
    assert len(counts) >= 5 and all(n >= 4 for _, n in counts), counts  # raw + smoothed per run


def test_axis_switch_changes_the_x_data(page):
    before = page.evaluate("() => document.getElementById('chart-0').data[1].x")
    page.select_option("#rc-axis", "step")
    page.wait_for_function(
        "document.getElementById('chart-0').layout.xaxis.title.text === 'optimizer step'")
    after = page.evaluate("() => document.getElementById('chart-0').data[1].x")
    assert after == [x / 1024 for x in before]  # 1,024 tokens per optimizer step
    page.select_option("#rc-axis", "tokens")


def test_axis_switch_reaches_flops_and_device_hours(page):
    mamba = rc.load(SAMPLES / "mamba")
    before = page.evaluate("() => document.getElementById('chart-0').data[1].x")
    for axis, title, run in (("flops", "training FLOPs", mamba),
                             ("device_hours", "device-hours", mamba)):
        page.select_option("#rc-axis", axis)
        page.wait_for_function(
            f"document.getElementById('chart-0').layout.xaxis.title.text === '{title}'")
        drawn = page.evaluate("() => document.getElementById('chart-0').data[1].x")
        expected = run.frame(x=axis).filter(metric="eval/loss").sort("step")["x"].to_list()
        assert drawn == pytest.approx(expected, rel=1e-6) and len(drawn) == len(before)
    page.select_option("#rc-axis", "tokens")


def test_screenshot_is_not_blank(page):
    pixels = _decode_png(page.screenshot(full_page=False))
    assert len(set(pixels)) > 20  # many distinct colours, not a blank page


def test_script_in_a_run_name_shows_as_text(browser, tmp_path):
    name = "<img src=x onerror=alert(1)><script>alert(2)</script>"
    report = tmp_path / "evil.html"
    write_report(rc.compare([rc.load(SAMPLES / "attn", name=name)], x="tokens"), report)
    tab = _open(browser, report)
    assert tab.dialogs == [] and tab.errors == []
    assert tab.inner_text("h1") == name
    legend = tab.evaluate("() => document.querySelector('#chart-0 .legendtext').textContent")
    assert legend == name
    tab.close()


def _decode_png(data: bytes) -> list[tuple[int, ...]]:
    """RGBA pixels of an 8-bit PNG (filter bytes ignored: enough to count colours)."""
    pos, chunks, width = 8, [], 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width = struct.unpack(">I", body[:4])[0]
        elif kind == b"IDAT":
            chunks.append(body)
        pos += 12 + length
    raw = zlib.decompress(b"".join(chunks))
    stride = width * 4 + 1
    return [tuple(raw[r + 1 + i:r + 5 + i]) for r in range(0, len(raw), stride * 40)
            for i in range(0, width * 4, 4 * 7)]


def test_png_and_svg_figures_drawn_by_the_installed_chromium(cli, tmp_path):
    report = tmp_path / "cmp.html"
    result = cli(SAMPLES / "mamba", SAMPLES / "attn", "-o", report, "--png", "--svg")
    assert result.exit_code == 0, result.stderr
    figures = tmp_path / "cmp"
    runs = rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"])
    metrics = rc.compare(runs).metrics
    pngs, svgs = sorted(figures.glob("*.png")), sorted(figures.glob("*.svg"))
    assert len(pngs) == len(svgs) == len(metrics)
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    assert all("<svg" in p.read_text()[:500] for p in svgs)
    assert len(set(_decode_png((figures / "eval_loss.png").read_bytes()))) > 5
