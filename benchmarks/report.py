"""Time the HTML report and print its size: 20 runs × 100,000 points, then 500 × 10,000.

    python benchmarks/report.py [--runs 20 --points 100000]   (one size; both by default)

Goals (issues 7 and 16), on the 2-core reference machine: 20 × 100,000 written in under 5 s
and under 8 MB; 500 × 10,000 under 15 MB and drawn by headless Chromium (when playwright
and /usr/bin/chromium are there) in under 5 s. compare() is timed apart (benchmarks/compare.py).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from synthetic import make_run

import runcompare as rc
from runcompare.report import write_report

CHROMIUM = "/usr/bin/chromium"
GOALS = {(20, 100_000): (5.0, 8.0), (500, 10_000): (None, 15.0)}


def measure(runs: int, points: int) -> None:
    comparison = rc.compare([make_run(i, points) for i in range(runs)], x="tokens")
    time_goal, size_goal = GOALS.get((runs, points), (None, None))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "report.html"
        start = time.perf_counter()
        write_report(comparison, path)
        seconds = time.perf_counter() - start
        size = path.stat().st_size / 1e6
        opened = _open_seconds(path)
    line = f"{runs} runs × {points:,} points: report written in {seconds:.2f} s"
    line += f" (goal < {time_goal:g} s: {seconds / time_goal:.2f} of it)" if time_goal else ""
    line += f", {size:.1f} MB"
    line += f" (goal < {size_goal:g} MB: {size / size_goal:.2f} of it)" if size_goal else ""
    if opened is not None:
        line += f", drawn in Chromium in {opened:.2f} s (goal < 5 s: {opened / 5:.2f} of it)"
    print(line)


def _open_seconds(path: Path) -> float | None:
    """Seconds from opening the report in headless Chromium to every chart drawn (None
    without playwright or /usr/bin/chromium)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path(CHROMIUM).is_file():
        return None
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu"])
        tab = browser.new_page(viewport={"width": 1400, "height": 900})
        start = time.perf_counter()
        tab.goto(path.as_uri())
        tab.wait_for_function("Array.from(document.querySelectorAll('.chart'))"
                              ".every(div => div.querySelector('.main-svg'))", timeout=60_000)
        seconds = time.perf_counter() - start
        browser.close()
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int)
    parser.add_argument("--points", type=int)
    args = parser.parse_args()
    sizes = [(args.runs or 20, args.points or 100_000)] if args.runs or args.points else GOALS
    for runs, points in sizes:
        measure(runs, points)


if __name__ == "__main__":
    main()
