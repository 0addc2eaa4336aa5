"""Time the HTML report for 20 runs × 100,000 points and print its size.

    python benchmarks/report.py [--runs 20] [--points 100000]

Goal (issue 7): written in under 5 s and under 8 MB on the 2-core reference machine.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from synthetic import runs_from_arguments

import runcompare as rc
from runcompare.report import write_report


def main() -> None:
    args, runs = runs_from_arguments(__doc__.splitlines()[0])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "report.html"
        start = time.perf_counter()
        write_report(rc.compare(runs, x="tokens"), path)
        seconds = time.perf_counter() - start
        size = path.stat().st_size
    print(f"{args.runs} runs × {args.points:,} points: report written in {seconds:.2f} s "
          f"(goal < 5 s), {size / 1e6:.1f} MB (goal < 8 MB)")


if __name__ == "__main__":
    main()
