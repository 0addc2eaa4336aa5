"""The report in a real browser: Debian's chromium, driven headless by Playwright.

No browser is downloaded: the test uses /usr/bin/chromium (``apt-get install chromium``; .ci/run
installs it) or $RUNCOMPARE_CHROMIUM. A missing browser fails the test; it is never skipped.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest

import runcompare as rc
from runcompare.report import static, write_report

from .conftest import DATA, SAMPLES
from .test_log_text import MARKUP, renamed_loss

CHROMIUM = os.environ.get("RUNCOMPARE_CHROMIUM", "/usr/bin/chromium")
#: How long a page may take to load and draw (ms): a full test run on two busy cores took
#: past Playwright's default 30 s for one page.
LOAD_MS = 180_000
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


def _open(browser, report: Path, width: int = 1200, height: int = 900):
    """A tab showing ``report``, recording console errors, requests and dialogs."""
    tab = browser.new_page(viewport={"width": width, "height": height})
    tab.set_default_timeout(LOAD_MS)
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
    assert len(counts) >= 5 and all(n >= 2 for _, n in counts), counts  # a trace per run or more


def test_axis_switch_changes_the_x_data(page):
    before = page.evaluate("() => document.getElementById('chart-0').data[1].x")
    page.select_option("#rc-axis", "step")
    page.wait_for_function(
        "document.getElementById('chart-0').layout.xaxis.title.text === 'optimizer steps'")
    after = page.evaluate("() => document.getElementById('chart-0').data[1].x")
    assert after == [x / 1024 for x in before]  # 1,024 tokens per optimizer step
    page.select_option("#rc-axis", "tokens")


def test_axis_switch_reaches_flops_and_device_hours(page):
    mamba = rc.load(SAMPLES / "mamba")
    before = page.evaluate("() => document.getElementById('chart-0').data[0].x")
    for axis, title, run in (("flops", "training FLOPs", mamba),
                             ("device_hours", "device-hours", mamba)):
        page.select_option("#rc-axis", axis)
        page.wait_for_function(
            f"document.getElementById('chart-0').layout.xaxis.title.text === '{title}'")
        drawn = page.evaluate("() => document.getElementById('chart-0').data[0].x")
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


REPORTS = {"samples": [SAMPLES / "mamba", SAMPLES / "attn"],
           "hf4": [DATA / "hf_ddp", DATA / "hf_global32", DATA / "hf_tokens",
                   DATA / "hf_v4_accum4"]}


@pytest.fixture(scope="module", params=["samples", "hf4", "sweep"])
def report(request, tmp_path_factory):
    """A written report: the sample runs, four HF runs of tests/data, a 200-run sweep."""
    path = tmp_path_factory.mktemp("reports") / f"{request.param}.html"
    if request.param == "sweep":
        comparison = request.getfixturevalue("sweep")
    else:
        comparison = rc.compare(rc.load_many(REPORTS[request.param]))
    write_report(comparison, path)
    return SimpleNamespace(path=path, name=path.name, comparison=comparison,
                           as_uri=path.as_uri)


@pytest.mark.parametrize("width", [1400, 420])
def test_the_first_screen_answers_and_nothing_scrolls_sideways(browser, report, width):
    tab = _open(browser, report.path, width=width, height=900)
    assert tab.errors == [] and tab.requests == [report.as_uri()]
    boxes = tab.evaluate("""() => Object.fromEntries(['rc-headline', 'chart-0'].map(id => {
        const r = document.getElementById(id).getBoundingClientRect();
        return [id, [r.top, r.bottom, r.height]]}).concat([['cards', Array.from(
        document.querySelectorAll('.card')).map(c => c.getBoundingClientRect().bottom)]]))""")
    top, bottom, height = boxes["rc-headline"]
    assert 0 < top < 80 and height > 20 and bottom < 200  # under the title, all of it
    headline = tab.inner_text("#rc-headline")
    assert headline == report.comparison.verdict.headline and len(headline.split()) <= 25
    cards = boxes["cards"]
    assert 3 <= len(cards) <= 5 and max(cards) < 900  # every key number in the first screen
    chart_top, chart_bottom, chart_height = boxes["chart-0"]
    assert chart_height > 250 and chart_top < 900
    if width == 1400:
        assert chart_bottom <= 900  # the main chart whole, above the fold
    # the verdict in full is folded under the chart, and opens
    assert not tab.is_visible("#rc-verdict")
    tab.click("details.prose summary")
    assert tab.inner_text("#rc-verdict") == str(report.comparison)
    sideways = tab.evaluate("() => document.documentElement.scrollWidth - innerWidth")
    assert sideways <= 0
    tab.close()


def _charts(tab) -> list[dict]:
    """The charts the axis switch redraws (a ``fixed`` one, the critical-batch fit of steps
    against samples, has axes of its own)."""
    return tab.evaluate("""() => Array.from(document.querySelectorAll('.chart:not(.fixed)'))
        .map(div => ({
        id: div.id, title: div.layout.title.text, axis: div.layout.xaxis.title.text,
        traces: div.data.map(t => ({x: t.x, y: t.y, mode: t.mode}))}))""")


def test_the_axis_switch_changes_every_charts_title_and_data(browser, report):
    tab = _open(browser, report.path)
    before = _charts(tab)
    assert before and all(c["title"].endswith(f" against {c['axis']}") for c in before)
    axis = report.comparison.x
    options = tab.evaluate("() => Array.from(document.querySelectorAll('#rc-axis option'))"
                           ".map(o => o.value)")
    timed = report.name != "sweep.html"  # the sweep's trainer_state.json logs no wall times
    assert {"step", "samples", "tokens", "flops"} | ({"elapsed", "wall_time", "device_hours"}
                                                     if timed else set()) <= set(options)
    second = ("wall_time", "wall-clock time (UTC)") if timed else ("flops", "training FLOPs")
    for other, label in (("step", "optimizer steps"), second):
        tab.select_option("#rc-axis", other)
        tab.wait_for_function(
            f"document.getElementById('chart-0').layout.xaxis.title.text === '{label}'")
        after = _charts(tab)
        assert all(c["axis"] == label and c["title"].endswith(f"against {label}") for c in after)
        for old, new in zip(before, after):
            assert [t["x"] for t in old["traces"]] != [t["x"] for t in new["traces"]], new["id"]
    kind = tab.evaluate("() => document.getElementById('chart-0').layout.xaxis.type")
    assert kind == ("date" if timed else "linear")  # wall-clock as times, not point indices
    tab.select_option("#rc-axis", axis)
    tab.close()


def test_no_chart_is_empty_and_few_points_are_marked(browser, report):
    tab = _open(browser, report.path)
    for chart in _charts(tab):
        drawn = [t for t in chart["traces"] if any(v is not None for v in t["y"])]
        assert drawn, chart["id"]
        for trace in drawn:
            shown = [v for v in trace["y"] if v is not None]
            if len(shown) <= 30 and trace["mode"] != "lines+markers":
                assert trace["mode"] == "lines" and len(shown) > 1
    tab.close()


def test_the_log_toggle_and_the_source_popover(browser, report):
    tab = _open(browser, report.path)
    tab.check('input[data-chart="0"]')
    tab.wait_for_function("document.getElementById('chart-0').layout.yaxis.type === 'log'")
    tab.uncheck('input[data-chart="0"]')
    tab.wait_for_function("document.getElementById('chart-0').layout.yaxis.type === 'linear'")
    button = tab.locator("button.src").first
    source = button.get_attribute("data-src")
    button.click()
    popover = tab.locator("#rc-pop")
    assert popover.is_visible() and popover.inner_text() == f"Source: {source}"
    box, anchor = popover.bounding_box(), button.bounding_box()
    assert abs(box["y"] - (anchor["y"] + anchor["height"])) < 10  # under the number
    tab.mouse.click(5, 5)
    assert not popover.is_visible()
    tab.close()


def test_coinciding_curves_are_announced(browser, report):
    tab = _open(browser, report.path)
    captions = tab.evaluate("() => Array.from(document.querySelectorAll('figcaption'))"
                            ".map(c => c.textContent)")
    if report.name == "hf4.html":  # three of the four eval/loss curves lie on each other
        assert captions[0].startswith(
            "hf_ddp, hf_tokens and hf_v4_accum4 coincide on samples: drawn solid, dash and dot")
        dashes = tab.evaluate("() => document.getElementById('chart-0').data"
                              ".map(t => [t.name, t.line.dash])")
        assert dict(dashes) == {"hf_ddp": "solid", "hf_global32": "solid", "hf_tokens": "dash",
                                "hf_v4_accum4": "dot"}
    elif report.name == "sweep.html":  # every run follows the same learning-rate schedule
        assert "coincide on tokens" in captions[1]
        assert "The 192 runs outside the top 8 are drawn faint in grey" in captions[0]
    else:  # mamba's and attn's learning rates follow one schedule on tokens
        assert captions[1].startswith("mamba and attn coincide on tokens")
        assert "coincide" not in captions[0]
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


def test_markup_in_a_metric_name_is_a_title_not_a_link(browser, tmp_path):
    run = rc.load(renamed_loss(tmp_path, MARKUP), cache=False)
    report = tmp_path / "markup.html"
    write_report(rc.compare([run], x="step", metrics=[MARKUP]), report)
    tab = _open(browser, report)
    assert tab.errors == [] and tab.requests == [report.as_uri()]
    title = tab.evaluate("() => document.querySelector('#chart-0 .gtitle').textContent")
    assert title == f"{MARKUP} against optimizer steps"
    assert tab.evaluate("() => document.querySelectorAll('#chart-0 a').length") == 0
    tab.close()


@contextlib.contextmanager
def _recording_proxy():
    """A local HTTP proxy that records the first line of each request and answers 502 (a
    connection closed before it sent a request, as a browser's preconnect may be, asked for
    nothing and is not recorded)."""
    seen: list[str] = []
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                with contextlib.suppress(OSError):
                    request = conn.recv(4096)
                    if not request:
                        continue
                    seen.append(request.split(b"\r\n", 1)[0].decode())
                    conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n"
                                 b"Connection: close\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}", seen
    finally:
        server.close()
        thread.join(5)


def test_static_figures_are_drawn_with_the_browsers_networking_off(tmp_path, monkeypatch):
    # a figure that asks for an outside image: the browser must hand that request to the
    # proxy it is given (which, when runcompare draws, is a closed port) instead of resolving
    # the host and connecting; the figure is drawn all the same
    figure = {"data": [{"type": "scatter", "x": [0, 1, 2], "y": [3, 1, 2]}],
              "layout": {"title": {"text": "probe"}, "images": [{
                  "source": "http://probe.example/outside.png", "xref": "paper",
                  "yref": "paper", "x": 0, "y": 1, "sizex": 0.2, "sizey": 0.2}]}}
    with _recording_proxy() as (url, seen), monkeypatch.context() as patched:
        patched.setattr(static, "_nowhere", lambda: contextlib.nullcontext(url))
        static._draw({tmp_path / "recorded.png": figure})
        probe = "GET http://probe.example/outside.png HTTP/1.1"
        for _ in range(50):  # the proxy's thread may record the request after the drawing ends
            if probe in seen:
                break
            time.sleep(0.1)
    assert probe in seen
    assert all(line.startswith(("GET http://", "POST http://", "CONNECT ")) for line in seen), seen
    static._draw({tmp_path / "closed.png": figure})  # the real closed port: drawn, no network
    for drawn in ("recorded.png", "closed.png"):
        data = (tmp_path / drawn).read_bytes()
        assert static.is_figure(tmp_path / drawn) and len(set(_decode_png(data))) > 5


def test_charts_resize_with_the_window(browser, report):
    tab = _open(browser, report.path, width=1400)
    width = "() => document.querySelector('#chart-0 .main-svg').getBoundingClientRect().width"
    wide = tab.evaluate(width)
    tab.set_viewport_size({"width": 700, "height": 900})
    tab.wait_for_function(f"({width})() < {wide} - 100")
    narrow = tab.evaluate(width)
    assert narrow <= 700 and tab.evaluate("document.documentElement.scrollWidth") <= 700
    tab.close()


def test_a_sweep_draws_its_hyperparameters_as_parallel_coordinates(browser, tmp_path):
    """Nine real HF runs: the chart draws one line per ranked run through the differing
    hyperparameters, without console errors or requests; no page scrolls sideways at 420."""
    runs = rc.load_many([DATA / "hf_seeds", DATA / "hf_tokens", DATA / "hf_v4_accum4",
                         DATA / "hf_wd0.1_adafactor"], settings=["seq_len=64"])
    report = write_report(rc.compare(runs), tmp_path / "sweep.html")
    for width in (1200, 420):
        tab = _open(browser, report, width=width)
        tab.wait_for_function("document.querySelectorAll('#rc-parcoords .parcoords').length")
        labels = tab.eval_on_selector_all("#rc-parcoords .axis-title", "e => e.map(x => "
                                          "x.textContent)")
        assert "learning_rate" in labels and "optim" in labels
        assert labels[-1] == "eval/loss at the budget"
        assert tab.evaluate("document.documentElement.scrollWidth <= innerWidth")
        assert tab.errors == [] and all(u.startswith(("file:", "data:")) for u in tab.requests)
        tab.close()


_LOSS = """Array.from(document.querySelectorAll('.chart')).find(div =>
    div.layout.title.text.startsWith('eval/loss')).data"""


def test_the_smoothing_slider_redraws_the_curves_and_the_hover_shows_every_run(browser,
                                                                               tmp_path):
    # two runs of the real batch sweep: 50 evals each, drawn raw (faint) and smoothed (bold)
    runs = rc.load_many([DATA / "batch_sweep" / "b4", DATA / "batch_sweep" / "b8"],
                        settings=["seq_len=64"])
    page = _open(browser, write_report(rc.compare(runs), tmp_path / "slider.html"))
    bold = f"() => {_LOSS}.filter(t => t.mode === 'lines' && !t.name.endsWith(' raw'))" \
           ".map(t => t.y)"
    before = page.evaluate(bold)
    raw = page.evaluate(f"() => {_LOSS}.filter(t => t.name.endsWith(' raw')).map(t => t.y)")
    assert before and before != raw
    page.fill("#rc-smooth", "0")  # no smoothing: the bold curves are the drawn points
    page.dispatch_event("#rc-smooth", "input")
    assert page.inner_text("#rc-smooth-value") == "none (raw)"
    assert page.evaluate(bold) == raw
    page.fill("#rc-smooth", "10")  # an EMA of half-life 10% of the range: smoother than raw
    page.dispatch_event("#rc-smooth", "input")
    assert page.inner_text("#rc-smooth-value") == "half-life 10% of the range"
    ten = page.evaluate(bold)
    assert ten != raw and ten != before and ten[0][0] == raw[0][0]  # an EMA starts at its first
    page.fill("#rc-smooth", "-1")  # back to the report's own
    page.dispatch_event("#rc-smooth", "input")
    assert page.inner_text("#rc-smooth-value") == "as computed"
    layout = page.evaluate("() => document.getElementById('chart-0').layout.hovermode")
    assert layout == "x unified"
    skipped = page.evaluate(f"() => {_LOSS}.filter(t => t.name.endsWith(' raw'))"
                            ".every(t => t.hoverinfo === 'skip')")
    assert skipped  # one hover line per run: the curve, not its raw twin
    page.close()


def test_dark_mode_follows_the_system(browser, tmp_path):
    report = write_report(rc.compare(rc.load_many([SAMPLES / "mamba", SAMPLES / "attn"])),
                          tmp_path / "dark.html")
    tab = browser.new_page(viewport={"width": 1200, "height": 900}, color_scheme="dark")
    tab.set_default_timeout(LOAD_MS)
    tab.goto(report.as_uri())
    tab.wait_for_function("document.querySelectorAll('.chart .main-svg').length > 0")
    background = tab.evaluate("() => getComputedStyle(document.body).backgroundColor")
    paper = tab.evaluate("() => document.getElementById('chart-0').layout.paper_bgcolor")
    assert background == "rgb(22, 24, 28)" and paper == "#16181c"
    tab.close()


def test_a_sweeps_leaderboard_sorts_and_filters_and_the_page_stays_short(browser, sweep,
                                                                         tmp_path):
    report = SimpleNamespace(path=write_report(sweep, tmp_path / "sweep.html"),
                             comparison=sweep)
    tab = _open(browser, report.path, width=1400, height=900)
    names = "() => Array.from(document.querySelectorAll('#rc-board tr')).filter(r => " \
            "!r.hidden && r.querySelector('td')).map(r => r.children[1].textContent)"
    ranked = tab.evaluate(names)
    assert ranked == list(report.comparison.verdict.run_values)
    tab.click("#rc-board tr:first-child th:nth-child(2)")  # by run name
    assert tab.evaluate(names) == sorted(ranked)
    tab.click("#rc-board tr:first-child th:nth-child(2)")  # the other way
    assert tab.evaluate(names) == sorted(ranked, reverse=True)
    tab.fill("#rc-filter", "lr_01")
    assert tab.evaluate(names) == sorted([n for n in ranked if "lr_01" in n], reverse=True)
    assert tab.inner_text("#rc-filter-count") == "10 of 200 runs"
    height = tab.evaluate("() => document.documentElement.scrollHeight")
    assert height < 47_200  # the measure of a 200-run page
    tab.close()
